// Safe file access for every reader in data/: only regular files are opened
// (a directory named "x.png" or a FIFO must never be read: the first made the
// readers size a buffer from a directory's size, the second blocked forever),
// and a check macro whose message speaks to the user (no "check `cond` failed"
// developer text, which MN_CHECK appends).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/error.h"

// Throws mn::Error with exactly the message parts given (they must say what is
// wrong and what to fix, naming the file or key).
#define MN_DATA_CHECK(cond, ...)   \
  do {                             \
    if (!(cond)) MN_THROW(__VA_ARGS__); \
  } while (0)

namespace mn::data {

// Reads the whole of `path`, which must be a regular file (symlinks followed).
// A directory, FIFO, socket or device throws naming the file and its type; the
// open uses O_NONBLOCK so a FIFO is refused instead of waiting for a writer.
// `who` prefixes the message (e.g. "read_csv").
std::vector<uint8_t> read_regular_file(const std::string& path, const char* who);

// What `path` is, in words, for messages: "a regular file", "a directory",
// "a FIFO (named pipe)", ... or "missing".
std::string describe_file_type(const std::string& path);

// For folder scans: true when `p` is a regular file; otherwise prints one line
// "<who>: skipping '<p>': <type>, not a regular file" on stderr and returns false.
bool regular_file_or_warn(const std::filesystem::path& p, const char* who);
// The same for a directory-listing entry, without a system call when the
// listing already says "regular file".
bool regular_file_or_warn(const std::filesystem::directory_entry& e, const char* who);

// The entries of folder `dir` (unsorted); an unreadable folder throws mn::Error
// naming it (std::filesystem's own exception would escape the readers' contract).
std::vector<std::filesystem::directory_entry> list_dir(const std::filesystem::path& dir,
                                                       const char* who);

// Parses a whole decimal integer (digits only, no sign) in [lo, hi]; false on
// anything else, including overflow (never undefined behaviour).
bool parse_int_in_range(const std::string& s, int64_t lo, int64_t hi, int64_t* out);

}  // namespace mn::data
