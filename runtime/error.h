// Exceptions and argument checks. Every failure in the library throws mn::Error
// carrying the failing expression or op, a message, and the file/line; library
// code never ends the process.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace mn {

class Error : public std::runtime_error {
 public:
  Error(const std::string& msg, const char* file, int line)
      : std::runtime_error(msg + " [" + file + ":" + std::to_string(line) + "]") {}
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

}  // namespace mn

// MN_CHECK(cond, "op", parts...) throws mn::Error("op: parts... (check `cond` failed)").
#define MN_CHECK(cond, ...)                                                              \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      throw ::mn::Error(::mn::detail::str(__VA_ARGS__, " (check `" #cond "` failed)"),    \
                        __FILE__, __LINE__);                                             \
    }                                                                                    \
  } while (0)

#define MN_THROW(...) throw ::mn::Error(::mn::detail::str(__VA_ARGS__), __FILE__, __LINE__)
