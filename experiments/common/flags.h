// Command-line flags and config files for the experiment binaries.
//
// Every flag is declared with a default, a help line and (for numbers) a valid
// range, so --help lists them all and the defaults live in the binary. Values
// come, in increasing priority, from the defaults, from `--config FILE` (lines
// `key = value` or `key: value`, # comments, the same keys as the flags without dashes)
// and from the command line (`--key value`, `--key=value`; boolean flags as
// bare `--key` / `--no-key` or `--key=true|false`).
//
// Who does what: CLI11 (Debian libcli11-dev) splits the command line into
// flags and values (spellings, `=`, `--no-` forms, missing values, unknown
// flags). The config file reader and the typed conversion of every value are
// our own: CLI11 2.1's config reader reports a bad value as "--loss: nope not
// in {...}" without the file or the line (tried), while a user editing a config
// file wants "study.cfg:2: --loss must be one of ...". The --help text is ours
// too, so that every flag shows its default, its range and its valid names.
//
// Errors throw mn::Error naming the flag (and the file and line for config
// files), which the harness turns into one line and exit status 2.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace mn::exp {

class Flags {
 public:
  explicit Flags(std::string program, std::string description)
      : program_(std::move(program)), description_(std::move(description)) {}

  // Where a value came from; a later source overrides an earlier one.
  enum class Origin { Default, Preset, Checkpoint, Config, CommandLine };

  // Declarations (call before parse). Numbers carry their valid range
  // [lo, hi], checked by validate_ranges() before any work starts.
  void add_string(const std::string& key, const std::string& def, const std::string& help,
                  std::vector<std::string> choices = {});
  void add_int(const std::string& key, int64_t def, const std::string& help,
               int64_t lo = std::numeric_limits<int64_t>::min(), int64_t hi = std::numeric_limits<int64_t>::max());
  void add_double(const std::string& key, double def, const std::string& help,
                  double lo = -std::numeric_limits<double>::max(), double hi = std::numeric_limits<double>::max());
  void add_bool(const std::string& key, bool def, const std::string& help);
  bool declared(const std::string& key) const { return entries_.count(key) != 0; }

  // Parses argv (config file first, then the command line). Returns false when
  // --help was given (help already printed to stdout).
  bool parse(int argc, char** argv);
  // Applies a config file (also used by --config).
  void load_config(const std::string& path);
  // The same from the file's text; `path` names it in error messages.
  void load_config_text(const std::string& text, const std::string& path);
  // Sets a value (converted and checked as from the command line); `where`
  // names the source in error messages ("command line", "study.cfg:3").
  void set(const std::string& key, const std::string& value, Origin origin, const std::string& where);
  // The same without trimming the value (a quoted config value keeps its spaces).
  void set_exact(const std::string& key, const std::string& value, Origin origin, const std::string& where);

  std::string str(const std::string& key) const;
  int64_t i64(const std::string& key) const;
  double f64(const std::string& key) const;
  bool flag(const std::string& key) const;
  // True when the user set it (command line or config), not a default or preset.
  bool user_set(const std::string& key) const;
  // user_set and the value differs from the declared default: what "this flag does
  // not apply here" checks ask, so that a run's config.txt (every flag, defaults
  // included) reads back without tripping them.
  bool user_changed(const std::string& key) const;
  Origin origin(const std::string& key) const;
  // The value as text (as config files and checkpoints hold it).
  std::string text(const std::string& key) const;
  std::vector<std::string> keys() const;  // in declaration order

  // --help in sections: each group's flags under its title, in the group's order;
  // groups with in_short_help false (and flags in no group) only under --help-all.
  // Keys a binary does not declare are skipped (one list can serve two binaries).
  struct HelpGroup {
    std::string title;
    bool in_short_help = true;
    std::vector<std::string> keys;
  };
  void set_help_groups(std::vector<HelpGroup> groups) { groups_ = std::move(groups); }

  // Throws naming the first flag outside its declared range.
  void validate_ranges() const;

  std::string help(bool all = false) const;
  // All values as a JSON object (numbers and booleans typed), in key order.
  std::string to_json() const;
  // `key = value` lines that load_config reads back (values with '#', quotes,
  // backslashes, newlines or outer spaces are written "quoted", with \" \\ \n escapes).
  std::string to_config() const;

 private:
  enum class Kind { String, Int, Double, Bool };
  struct Entry {
    Kind kind;
    std::string value, def, help;
    std::vector<std::string> choices;
    Origin origin = Origin::Default;
    size_t order = 0;
    int64_t ilo = 0, ihi = 0;
    double dlo = 0, dhi = 0;
  };
  const Entry& get(const std::string& key, Kind kind) const;
  std::string program_, description_;
  std::map<std::string, Entry> entries_;
  std::vector<HelpGroup> groups_;
  std::string flag_line(const std::string& key) const;
};

// Writes `text` to `path` atomically: a temporary file in the same folder,
// flushed and fsync'ed, then renamed over the target.
void write_file_atomic(const std::string& path, const std::string& text);
// A flag's value as a config file line holds it (to_config): "quoted" with \" \\ \n escapes
// when it has '#', quotes, backslashes, newlines or outer spaces, else as it is.
std::string config_value_text(const std::string& v);

}  // namespace mn::exp
