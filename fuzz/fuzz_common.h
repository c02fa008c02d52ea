// Shared by the libFuzzer targets: every parser must either return or throw
// mn::Error for any input. Anything else (a crash, a sanitizer report, another
// exception type such as std::bad_alloc or std::out_of_range, a hang) is a
// finding. The catch clause below deliberately lets other exceptions escape so
// libFuzzer reports them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "runtime/error.h"

#define MN_FUZZ_TARGET(...)                                                   \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {   \
    try {                                                                     \
      __VA_ARGS__;                                                            \
    } catch (const ::mn::Error&) {                                            \
    }                                                                         \
    return 0;                                                                 \
  }
