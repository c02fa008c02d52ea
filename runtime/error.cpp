// User-facing error text (see error.h): the message alone for users, the check
// and source location only when a developer asks with MN_DEBUG_ERRORS=1.
#include "runtime/error.h"

#include <cstdlib>
#include <cstring>

namespace mn {

bool debug_errors() {
  const char* v = std::getenv("MN_DEBUG_ERRORS");
  return v && *v && std::strcmp(v, "0") != 0;
}

std::string user_message(const std::exception& e) {
  if (auto* err = dynamic_cast<const Error*>(&e)) {
    if (debug_errors()) return err->message() + " [" + err->developer_detail() + "]";
    return err->message();
  }
  return e.what();
}

}  // namespace mn
