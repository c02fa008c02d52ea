// Exceptions and argument checks. Every failure in the library throws mn::Error
// carrying a message in the user's words (message()), and, apart from it, the
// failing check and the file/line for developers (check(), file(), line(),
// developer_detail()); library code never ends the process.
//
// what() keeps all of it (message, check, [file:line]) for developers reading a
// test log; the `main` of a binary prints user_message(e): the message only, and
// the developer detail too when the environment has MN_DEBUG_ERRORS=1.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace mn {

class Error : public std::runtime_error {
 public:
  Error(const std::string& msg, const char* file, int line, const char* check = "")
      : std::runtime_error(msg + (check && *check ? std::string(" (check `") + check + "` failed)" : std::string()) +
                           " [" + file + ":" + std::to_string(line) + "]"),
        msg_(msg), check_(check ? check : ""), file_(file ? file : ""), line_(line) {}

  // The cause in the user's words, without the check or the source location.
  const std::string& message() const { return msg_; }
  // The failed condition ("" for MN_THROW) and where it is in the source.
  const std::string& check() const { return check_; }
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  // "check `cond` failed at file:line" (or "thrown at file:line").
  std::string developer_detail() const {
    return (check_.empty() ? std::string("thrown") : "check `" + check_ + "` failed") + " at " + file_ + ":" +
           std::to_string(line_);
  }

 private:
  std::string msg_, check_, file_;
  int line_;
};

// A CUDA runtime failure: the expression, CUDA's error name and message.
class CudaError : public Error {
 public:
  using Error::Error;
};

namespace detail {
// Streams any number of values into one string: mn::detail::str("a=", a, " b=", b).
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// True when the environment has MN_DEBUG_ERRORS set to something other than "0"
// or "": error lines of the binaries then carry the developer detail too.
bool debug_errors();

// What a binary's `main` prints for `e`: for an mn::Error its message() (and,
// with MN_DEBUG_ERRORS=1, " [check `cond` failed at file:line]"); for any other
// exception what().
std::string user_message(const std::exception& e);

}  // namespace mn

// MN_CHECK(cond, "op", parts...) throws mn::Error with message "op: parts..."
// and check "cond" (what(): "op: parts... (check `cond` failed) [file:line]").
#define MN_CHECK(cond, ...)                                                                \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      throw ::mn::Error(::mn::detail::str(__VA_ARGS__), __FILE__, __LINE__, #cond);        \
    }                                                                                      \
  } while (0)

#define MN_THROW(...) throw ::mn::Error(::mn::detail::str(__VA_ARGS__), __FILE__, __LINE__)
