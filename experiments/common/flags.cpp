// Flags, config files and atomic text writes (see flags.h).
#include "experiments/common/flags.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "runtime/error.h"

namespace mn::exp {

namespace {
std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}
bool parse_bool(const std::string& v, bool* out) {
  std::string l = v;
  std::transform(l.begin(), l.end(), l.begin(), ::tolower);
  if (l == "1" || l == "true" || l == "yes" || l == "on") return *out = true, true;
  if (l == "0" || l == "false" || l == "no" || l == "off") return *out = false, true;
  return false;
}
}  // namespace

void Flags::add_string(const std::string& key, const std::string& def, const std::string& help,
                       std::vector<std::string> choices) {
  entries_[key] = Entry{Kind::String, def, def, help, std::move(choices), false, entries_.size()};
}
void Flags::add_int(const std::string& key, int64_t def, const std::string& help) {
  entries_[key] = Entry{Kind::Int, std::to_string(def), std::to_string(def), help, {}, false, entries_.size()};
}
void Flags::add_double(const std::string& key, double def, const std::string& help) {
  std::ostringstream os;
  os << def;
  entries_[key] = Entry{Kind::Double, os.str(), os.str(), help, {}, false, entries_.size()};
}
void Flags::add_bool(const std::string& key, bool def, const std::string& help) {
  std::string v = def ? "true" : "false";
  entries_[key] = Entry{Kind::Bool, v, v, help, {}, false, entries_.size()};
}

void Flags::set(const std::string& key, const std::string& value, const std::string& origin) {
  auto it = entries_.find(key);
  if (it == entries_.end())
    MN_THROW(origin, ": unknown option '", key, "' (see --help)");
  Entry& e = it->second;
  std::string v = trim(value);
  switch (e.kind) {
    case Kind::Int: {
      char* end = nullptr;
      errno = 0;
      long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || errno) MN_THROW(origin, ": --", key, " expects an integer, got '", value, "'");
      e.value = std::to_string(x);
      break;
    }
    case Kind::Double: {
      char* end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !std::isfinite(x))
        MN_THROW(origin, ": --", key, " expects a number, got '", value, "'");
      e.value = v;
      break;
    }
    case Kind::Bool: {
      bool b;
      if (!parse_bool(v, &b)) MN_THROW(origin, ": --", key, " expects true/false, got '", value, "'");
      e.value = b ? "true" : "false";
      break;
    }
    case Kind::String:
      if (!e.choices.empty() && std::find(e.choices.begin(), e.choices.end(), v) == e.choices.end()) {
        std::string all;
        for (auto& c : e.choices) all += (all.empty() ? "" : "|") + c;
        MN_THROW(origin, ": --", key, " must be one of ", all, ", got '", value, "'");
      }
      e.value = v;
      break;
  }
  e.user = true;
}

void Flags::load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) MN_THROW("--config: cannot open '", path, "'");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    size_t hash = line.find('#');
    if (hash != std::string::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    size_t sep = line.find_first_of("=:");
    if (sep == std::string::npos)
      MN_THROW(path, ":", n, ": expected 'key = value', got '", line, "'");
    std::string key = trim(line.substr(0, sep));
    if (key.rfind("--", 0) == 0) key = key.substr(2);
    if (key == "config") MN_THROW(path, ":", n, ": a config file cannot include another");
    set(key, line.substr(sep + 1), path + ":" + std::to_string(n));
  }
}

bool Flags::parse(int argc, char** argv) {
  // Config first (wherever it appears), then the command line overrides it.
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << help();
      return false;
    }
    if (a == "--config") {
      if (i + 1 >= argc) MN_THROW("--config needs a file name");
      load_config(argv[i + 1]);
    } else if (a.rfind("--config=", 0) == 0) {
      load_config(a.substr(9));
    }
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) MN_THROW("unexpected argument '", a, "' (flags start with --; see --help)");
    std::string key = a.substr(2), value;
    bool has_value = false;
    size_t eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      has_value = true;
    }
    if (key == "config") {
      if (!has_value) ++i;
      continue;
    }
    auto it = entries_.find(key);
    if (it == entries_.end() && key.rfind("no-", 0) == 0) {
      auto jt = entries_.find(key.substr(3));
      if (jt != entries_.end() && jt->second.kind == Kind::Bool && !has_value) {
        set(key.substr(3), "false", "command line");
        continue;
      }
    }
    if (it == entries_.end()) MN_THROW("unknown flag --", key, " (see --help)");
    if (it->second.kind == Kind::Bool && !has_value) {
      bool dummy;
      if (i + 1 < argc && parse_bool(argv[i + 1], &dummy)) value = argv[++i];
      else value = "true";
    } else if (!has_value) {
      if (i + 1 >= argc) MN_THROW("flag --", key, " needs a value");
      value = argv[++i];
    }
    set(key, value, "command line");
  }
  return true;
}

const Flags::Entry& Flags::get(const std::string& key, Kind kind) const {
  auto it = entries_.find(key);
  MN_CHECK(it != entries_.end(), "Flags: option '", key, "' was never declared");
  MN_CHECK(it->second.kind == kind, "Flags: option '", key, "' read with the wrong type");
  return it->second;
}
std::string Flags::str(const std::string& key) const { return get(key, Kind::String).value; }
int64_t Flags::i64(const std::string& key) const { return std::stoll(get(key, Kind::Int).value); }
double Flags::f64(const std::string& key) const { return std::stod(get(key, Kind::Double).value); }
bool Flags::flag(const std::string& key) const { return get(key, Kind::Bool).value == "true"; }
bool Flags::user_set(const std::string& key) const {
  auto it = entries_.find(key);
  return it != entries_.end() && it->second.user;
}

std::string Flags::help() const {
  std::ostringstream os;
  os << "usage: " << program_ << " [--flag value ...] [--config FILE]\n" << description_ << "\n\nflags:\n";
  std::vector<std::pair<size_t, std::string>> order;
  for (auto& [k, e] : entries_) order.emplace_back(e.order, k);
  std::sort(order.begin(), order.end());
  for (auto& [o, k] : order) {
    const Entry& e = entries_.at(k);
    std::string head = "  --" + k;
    if (e.kind != Kind::Bool) head += " " + std::string(e.kind == Kind::Int ? "N" : e.kind == Kind::Double ? "X" : "S");
    os << head << std::string(head.size() < 28 ? 28 - head.size() : 1, ' ') << e.help;
    if (!e.choices.empty()) {
      os << " (";
      for (size_t i = 0; i < e.choices.size(); ++i) os << (i ? "|" : "") << e.choices[i];
      os << ")";
    }
    os << " [default: " << (e.def.empty() ? "\"\"" : e.def) << "]\n";
  }
  os << "  --config FILE               read `key = value` lines (same keys) before the command line\n"
     << "  --help                      this text\n";
  return os.str();
}

std::string json_escape(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

std::string Flags::to_json() const {
  std::ostringstream os;
  os << "{";
  bool first = true;
  for (auto& [k, e] : entries_) {
    os << (first ? "" : ", ") << json_escape(k) << ": ";
    first = false;
    if (e.kind == Kind::String) os << json_escape(e.value);
    else os << e.value;
  }
  return os.str() + "}";
}

std::string Flags::to_config() const {
  std::ostringstream os;
  for (auto& [k, e] : entries_) os << k << " = " << e.value << "\n";
  return os.str();
}

void write_file_atomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) MN_THROW("cannot write '", tmp, "': ", std::strerror(errno));
  size_t off = 0;
  while (off < text.size()) {
    ssize_t w = ::write(fd, text.data() + off, text.size() - off);
    if (w < 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      MN_THROW("write to '", tmp, "' failed: ", std::strerror(errno));
    }
    off += static_cast<size_t>(w);
  }
  ::fsync(fd);
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    MN_THROW("cannot rename '", tmp, "' to '", path, "': ", std::strerror(errno));
  }
}

}  // namespace mn::exp
