// Flags (flags.h): declaration, parsing of the command line and config files, the checks,
// and atomic text writes. What a Flags writes (help, config.txt, JSON) is in flags_text.cpp.
#include "experiments/common/flags.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "experiments/common/json.h"
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
// Shortest text that reads back to the same double ("3e-4" stays 0.0003).
std::string double_text(double v) { return Json(v).dump(); }
}  // namespace

void Flags::add_string(const std::string& key, const std::string& def, const std::string& help,
                       std::vector<std::string> choices) {
  Entry e{Kind::String, def, def, help, std::move(choices)};
  e.order = entries_.size();
  entries_[key] = e;
}
void Flags::add_int(const std::string& key, int64_t def, const std::string& help, int64_t lo, int64_t hi) {
  Entry e{Kind::Int, std::to_string(def), std::to_string(def), help, {}};
  e.order = entries_.size();
  e.ilo = lo, e.ihi = hi;
  entries_[key] = e;
}
void Flags::add_double(const std::string& key, double def, const std::string& help, double lo, double hi) {
  Entry e{Kind::Double, double_text(def), double_text(def), help, {}};
  e.order = entries_.size();
  e.dlo = lo, e.dhi = hi;
  entries_[key] = e;
}
void Flags::add_bool(const std::string& key, bool def, const std::string& help) {
  std::string v = def ? "true" : "false";
  Entry e{Kind::Bool, v, v, help, {}};
  e.order = entries_.size();
  entries_[key] = e;
}

namespace {
// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points above U+10FFFF), as nlohmann::json requires when it writes a string.
bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > n) return false;
    unsigned cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += static_cast<size_t>(len);
  }
  return true;
}
}  // namespace

void Flags::set(const std::string& key, const std::string& value, Origin origin, const std::string& where) {
  set_exact(key, trim(value), origin, where);
}

void Flags::set_exact(const std::string& key, const std::string& value, Origin origin, const std::string& where) {
  auto it = entries_.find(key);
  if (it == entries_.end()) MN_THROW(where, ": unknown option '", key, "' (see --help)");
  Entry& e = it->second;
  const std::string& v = value;
  switch (e.kind) {
    case Kind::Int: {
      char* end = nullptr;
      errno = 0;
      long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end) MN_THROW(where, ": --", key, " expects an integer, got '", value, "'");
      if (errno == ERANGE) MN_THROW(where, ": --", key, " = ", value, " does not fit a 64-bit integer");
      e.value = std::to_string(x);
      break;
    }
    case Kind::Double: {
      char* end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !std::isfinite(x))
        MN_THROW(where, ": --", key, " expects a finite number, got '", value, "'");
      e.value = double_text(x);
      break;
    }
    case Kind::Bool: {
      bool b;
      if (!parse_bool(v, &b)) MN_THROW(where, ": --", key, " expects true or false, got '", value, "'");
      e.value = b ? "true" : "false";
      break;
    }
    case Kind::String:
      // Values end up in JSON (checkpoints, summary.json), which must be UTF-8.
      if (!valid_utf8(v))
        MN_THROW(where, ": --", key, " is not valid UTF-8 text (a file name in another encoding?); "
                 "rename it or give a UTF-8 path");
      if (!e.choices.empty() && std::find(e.choices.begin(), e.choices.end(), v) == e.choices.end()) {
        std::string all;
        for (auto& c : e.choices) all += (all.empty() ? "" : "|") + c;
        MN_THROW(where, ": --", key, " must be one of ", all, ", got '", value, "'");
      }
      e.value = v;
      break;
  }
  e.origin = origin;
}

void Flags::load_config(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) MN_THROW("--config: cannot open '", path, "': ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) MN_THROW("--config: '", path, "' is not a regular file (a directory?); give a file of "
                                     "`key = value` lines");
  std::ifstream in(path);
  if (!in) MN_THROW("--config: cannot open '", path, "'");
  std::stringstream text;
  text << in.rdbuf();
  load_config_text(text.str(), path);
}

void Flags::load_config_text(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::string raw;
  int n = 0;
  while (std::getline(in, raw)) {
    ++n;
    const std::string where = path + ":" + std::to_string(n);
    std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    const size_t sep = line.find_first_of("=:");  // `key: value` too (YAML-like files)
    const size_t hash = line.find('#');
    if (sep == std::string::npos || (hash != std::string::npos && hash < sep))
      MN_THROW(where, ": expected 'key = value', got '", trim(line.substr(0, std::min(hash, line.size()))), "'");
    std::string key = trim(line.substr(0, sep));
    if (key.rfind("--", 0) == 0) key = key.substr(2);
    if (key == "config") MN_THROW(where, ": a config file cannot include another");
    std::string value = trim(line.substr(sep + 1));
    if (!value.empty() && value[0] == '"') {
      // "quoted": '#' and spaces kept, \" \\ \n escapes (to_config writes this form when needed).
      std::string v;
      size_t i = 1;
      for (; i < value.size() && value[i] != '"'; ++i) {
        if (value[i] == '\\' && i + 1 < value.size()) {
          const char c = value[++i];
          v += c == 'n' ? '\n' : c;
        } else {
          v += value[i];
        }
      }
      if (i >= value.size()) MN_THROW(where, ": --", key, ": the quoted value has no closing '\"'");
      const std::string after = trim(value.substr(i + 1));
      if (!after.empty() && after[0] != '#')
        MN_THROW(where, ": --", key, ": unexpected '", after, "' after the quoted value");
      set_exact(key, v, Origin::Config, where);
    } else {
      const size_t h = value.find('#');
      set(key, h == std::string::npos ? value : value.substr(0, h), Origin::Config, where);
    }
  }
}

bool Flags::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h" || a == "--help-all") {
      std::cout << help(a == "--help-all");
      return false;
    }
  }
  // CLI11 tokenises; every value lands as text and goes through set() below.
  CLI::App app(description_, program_);
  app.set_help_flag();
  app.allow_windows_style_options(false);
  std::string config;
  app.add_option("--config", config);
  std::map<std::string, std::string> text;
  std::map<std::string, bool> bools;
  std::map<std::string, CLI::Option*> opts;
  for (auto& [k, e] : entries_) {
    if (e.kind == Kind::Bool) opts[k] = app.add_flag("--" + k + ",!--no-" + k, bools[k]);
    else opts[k] = app.add_option("--" + k, text[k])->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& err) {
    MN_THROW("command line: ", err.what(), " (see --help)");
  }
  if (!config.empty() || app.get_option("--config")->count()) {
    if (config.empty()) MN_THROW("--config needs a file name");
    load_config(config);
  }
  for (auto& [k, o] : opts) {
    if (o->count() == 0) continue;
    const Entry& e = entries_.at(k);
    set(k, e.kind == Kind::Bool ? (bools[k] ? "true" : "false") : text[k], Origin::CommandLine, "command line");
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
// Values were converted and checked in set(): these parses cannot fail.
int64_t Flags::i64(const std::string& key) const { return std::strtoll(get(key, Kind::Int).value.c_str(), nullptr, 10); }
double Flags::f64(const std::string& key) const { return std::strtod(get(key, Kind::Double).value.c_str(), nullptr); }
bool Flags::flag(const std::string& key) const { return get(key, Kind::Bool).value == "true"; }
bool Flags::user_set(const std::string& key) const {
  auto it = entries_.find(key);
  return it != entries_.end() && (it->second.origin == Origin::Config || it->second.origin == Origin::CommandLine);
}
bool Flags::user_changed(const std::string& key) const {
  if (!user_set(key)) return false;
  const Entry& e = entries_.at(key);
  switch (e.kind) {  // compare as values: "1e-3" and "0.001" are the same double
    case Kind::Int: return std::strtoll(e.value.c_str(), nullptr, 10) != std::strtoll(e.def.c_str(), nullptr, 10);
    case Kind::Double: return std::strtod(e.value.c_str(), nullptr) != std::strtod(e.def.c_str(), nullptr);
    default: return e.value != e.def;
  }
}
Flags::Origin Flags::origin(const std::string& key) const {
  auto it = entries_.find(key);
  MN_CHECK(it != entries_.end(), "Flags: option '", key, "' was never declared");
  return it->second.origin;
}
std::string Flags::text(const std::string& key) const {
  auto it = entries_.find(key);
  MN_CHECK(it != entries_.end(), "Flags: option '", key, "' was never declared");
  return it->second.value;
}
std::vector<std::string> Flags::keys() const {
  std::vector<std::pair<size_t, std::string>> order;
  for (auto& [k, e] : entries_) order.emplace_back(e.order, k);
  std::sort(order.begin(), order.end());
  std::vector<std::string> out;
  for (auto& o : order) out.push_back(o.second);
  return out;
}

void Flags::validate_ranges() const {
  for (const auto& k : keys()) {
    const Entry& e = entries_.at(k);
    if (e.kind == Kind::Int) {
      const int64_t v = i64(k);
      if (v < e.ilo || v > e.ihi)
        MN_THROW("--", k, " = ", v, " is out of range: it must be ", e.ihi == std::numeric_limits<int64_t>::max()
                 ? ">= " + std::to_string(e.ilo) : "in [" + std::to_string(e.ilo) + ", " + std::to_string(e.ihi) + "]");
    } else if (e.kind == Kind::Double) {
      const double v = f64(k);
      if (v < e.dlo || v > e.dhi)
        MN_THROW("--", k, " = ", e.value, " is out of range: it must be ", e.dhi == std::numeric_limits<double>::max()
                 ? ">= " + double_text(e.dlo) : "in [" + double_text(e.dlo) + ", " + double_text(e.dhi) + "]");
    }
  }
}

void write_file_atomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) MN_THROW("cannot write '", path, "': ", std::strerror(errno));
  size_t off = 0;
  while (off < text.size()) {
    ssize_t w = ::write(fd, text.data() + off, text.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      MN_THROW("writing '", path, "' failed: ", std::strerror(e), " (disk full?)");
    }
    off += static_cast<size_t>(w);
  }
  // A full disk can surface only at fsync or close: both are checked, so a
  // truncated file never replaces a good one.
  const bool synced = ::fsync(fd) == 0 || errno == EINVAL;  // EINVAL: a special file that cannot sync
  const int sync_errno = errno;
  const bool closed = ::close(fd) == 0;
  const int close_errno = errno;
  if (!closed || !synced) {
    const int e = synced ? close_errno : sync_errno;
    ::unlink(tmp.c_str());
    MN_THROW("writing '", path, "' failed: ", std::strerror(e), " (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    MN_THROW("cannot write '", path, "' (renaming its temporary file failed: ", std::strerror(e), ")");
  }
}

}  // namespace mn::exp
