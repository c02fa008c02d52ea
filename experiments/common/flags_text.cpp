// What a Flags writes (flags.h): the --help text (flag_line, help), config.txt
// (to_config, config_value_text) and the JSON copy of the values (to_json). It reads
// the flags' entries only; parsing and checking are in flags.cpp.
#include <algorithm>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include "experiments/common/flags.h"
#include "experiments/common/json.h"
#include "runtime/error.h"

namespace mn::exp {

namespace {
// Shortest text that reads back to the same double (as flags.cpp writes the values).
std::string double_text(double v) { return Json(v).dump(); }
}  // namespace


std::string Flags::flag_line(const std::string& k) const {
  std::ostringstream os;
  const Entry& e = entries_.at(k);
  std::string head = "  --" + k;
  if (e.kind != Kind::Bool) head += " " + std::string(e.kind == Kind::Int ? "N" : e.kind == Kind::Double ? "X" : "S");
  else head += " | --no-" + k;
  os << head << std::string(head.size() < 30 ? 30 - head.size() : 1, ' ') << e.help;
  if (!e.choices.empty()) {
    os << " (one of: ";
    for (size_t i = 0; i < e.choices.size(); ++i) os << (i ? "|" : "") << e.choices[i];
    os << ")";
  }
  if (e.kind == Kind::Int && (e.ilo != std::numeric_limits<int64_t>::min() || e.ihi != std::numeric_limits<int64_t>::max()))
    os << " (" << (e.ihi == std::numeric_limits<int64_t>::max() ? ">= " + std::to_string(e.ilo)
                   : std::to_string(e.ilo) + ".." + std::to_string(e.ihi)) << ")";
  if (e.kind == Kind::Double && (e.dlo != -std::numeric_limits<double>::max() || e.dhi != std::numeric_limits<double>::max()))
    os << " (" << (e.dhi == std::numeric_limits<double>::max() ? ">= " + Json(e.dlo).dump()
                   : double_text(e.dlo) + ".." + double_text(e.dhi)) << ")";
  os << " [default: " << (e.def.empty() ? "\"\"" : e.def) << "]\n";
  return os.str();
}

std::string Flags::help(bool all) const {
  std::ostringstream os;
  os << "usage: " << program_ << " [--flag value ...] [--config FILE]\n" << description_ << "\n";
  const std::string tail = "  --config FILE                 read `key = value` lines (same keys, '#' comments) before "
                           "the command line\n  --help                        this text\n";
  if (groups_.empty()) {
    os << "\nflags:\n";
    for (const auto& k : keys()) os << flag_line(k);
    return os.str() + tail + "  --help-all                    the same\n";
  }
  std::set<std::string> listed;
  std::vector<std::string> hidden;
  for (const HelpGroup& g : groups_) {
    std::string lines;
    for (const std::string& k : g.keys)
      if (entries_.count(k) && listed.insert(k).second) lines += flag_line(k);
    if (lines.empty()) continue;
    if (!all && !g.in_short_help) {
      hidden.push_back(g.title);
      continue;
    }
    os << "\n" << g.title << ":\n" << lines;
  }
  std::string rest;
  for (const auto& k : keys())
    if (!listed.count(k)) rest += flag_line(k);
  if (!rest.empty()) {
    if (all) os << "\nother flags:\n" << rest;
    else hidden.push_back("other flags");
  }
  os << "\n" << tail;
  if (!hidden.empty()) {
    os << "  --help-all                    also ";
    for (size_t i = 0; i < hidden.size(); ++i) os << (i ? (i + 1 == hidden.size() ? " and " : ", ") : "") << hidden[i];
    os << "\n";
  }
  return os.str();
}

std::string Flags::to_json() const {
  Json j = Json::object();
  for (auto& [k, e] : entries_) {
    switch (e.kind) {
      case Kind::String: j[k] = e.value; break;
      case Kind::Int: j[k] = i64(k); break;
      case Kind::Double: j[k] = f64(k); break;
      case Kind::Bool: j[k] = flag(k); break;
    }
  }
  return j.dump();
}

std::string config_value_text(const std::string& v) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };  // what parsing trims
  const bool quote = !v.empty() && (v.find_first_of("#\"\\\n\r") != std::string::npos || blank(v.front()) ||
                                    blank(v.back()));
  if (!quote) return v;
  std::string q = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') q += std::string("\\") + c;
    else if (c == '\n') q += "\\n";
    else q += c;
  }
  return q + "\"";
}

std::string Flags::to_config() const {
  std::ostringstream os;
  for (auto& [k, e] : entries_) os << k << " = " << config_value_text(e.value) << "\n";
  return os.str();
}

}  // namespace mn::exp
