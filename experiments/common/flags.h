// Command-line flags and config files for the experiment binaries.
//
// Every flag is declared with a default and a help line, so --help lists them
// all and the defaults live in the binary. Values come, in increasing priority,
// from the defaults, from `--config FILE` (lines `key = value` or `key: value`,
// '#' comments, the same keys as the flags without the dashes) and from the
// command line (`--key value`, `--key=value`; boolean flags also as bare
// `--key` / `--no-key`). Unknown keys and malformed values throw mn::Error
// naming the flag (or the file and line), which main() turns into a message
// and exit status 2.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mn::exp {

class Flags {
 public:
  explicit Flags(std::string program, std::string description)
      : program_(std::move(program)), description_(std::move(description)) {}

  // Declarations (call before parse).
  void add_string(const std::string& key, const std::string& def, const std::string& help,
                  std::vector<std::string> choices = {});
  void add_int(const std::string& key, int64_t def, const std::string& help);
  void add_double(const std::string& key, double def, const std::string& help);
  void add_bool(const std::string& key, bool def, const std::string& help);

  // Parses argv. Returns false when --help was given (help already printed).
  bool parse(int argc, char** argv);
  // Applies a config file (also used by --config).
  void load_config(const std::string& path);
  // Sets a value programmatically (validated as from the command line).
  void set(const std::string& key, const std::string& value, const std::string& origin = "code");

  std::string str(const std::string& key) const;
  int64_t i64(const std::string& key) const;
  double f64(const std::string& key) const;
  bool flag(const std::string& key) const;
  // True when the user set it (command line or config), not the default.
  bool user_set(const std::string& key) const;

  std::string help() const;
  // All values as a JSON object (for metrics and checkpoints).
  std::string to_json() const;
  // `key = value` lines that load_config reads back.
  std::string to_config() const;

 private:
  enum class Kind { String, Int, Double, Bool };
  struct Entry {
    Kind kind;
    std::string value, def, help;
    std::vector<std::string> choices;
    bool user = false;
    size_t order = 0;
  };
  const Entry& get(const std::string& key, Kind kind) const;
  std::string program_, description_;
  std::map<std::string, Entry> entries_;
};

// Writes `text` to `path` atomically: a temporary file in the same folder,
// flushed and fsync'ed, then renamed over the target.
void write_file_atomic(const std::string& path, const std::string& text);

// Minimal JSON helpers.
std::string json_escape(const std::string& s);
std::string json_number(double v);  // NaN/Inf become null

}  // namespace mn::exp
