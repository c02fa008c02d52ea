// Dtype dispatch: run a generic lambda with `scalar_t` bound to the tensor's C++ type.
//
//   MN_DISPATCH_FLOAT(x.dtype(), "relu", [&] { relu_cpu<scalar_t>(...); });
//
// Unsupported dtypes throw mn::Error naming the op and the dtype.
#pragma once
#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/error.h"

#define MN_DISPATCH_CASE_(enum_v, type, ...) \
  case ::mn::DType::enum_v: {                \
    using scalar_t = type;                   \
    __VA_ARGS__();                           \
    break;                                   \
  }

#define MN_DISPATCH_FLOAT(dtype, opname, ...)                                       \
  switch (dtype) {                                                                  \
    MN_DISPATCH_CASE_(F32, float, __VA_ARGS__)                                      \
    MN_DISPATCH_CASE_(F64, double, __VA_ARGS__)                                     \
    default:                                                                        \
      MN_THROW(opname, ": unsupported dtype ", ::mn::dtype_name(dtype),             \
               " (expected float32 or float64)");                                   \
  }

#define MN_DISPATCH_ALL(dtype, opname, ...)            \
  switch (dtype) {                                     \
    MN_DISPATCH_CASE_(F32, float, __VA_ARGS__)         \
    MN_DISPATCH_CASE_(F64, double, __VA_ARGS__)        \
    MN_DISPATCH_CASE_(I32, int32_t, __VA_ARGS__)       \
    MN_DISPATCH_CASE_(I64, int64_t, __VA_ARGS__)       \
    MN_DISPATCH_CASE_(U8, uint8_t, __VA_ARGS__)        \
    default: MN_THROW(opname, ": unknown dtype");      \
  }

#define MN_DISPATCH_INDEX(dtype, opname, ...)                                        \
  switch (dtype) {                                                                   \
    MN_DISPATCH_CASE_(I32, int32_t, __VA_ARGS__)                                     \
    MN_DISPATCH_CASE_(I64, int64_t, __VA_ARGS__)                                     \
    default:                                                                         \
      MN_THROW(opname, ": index tensor has dtype ", ::mn::dtype_name(dtype),         \
               " (expected int32 or int64)");                                        \
  }
