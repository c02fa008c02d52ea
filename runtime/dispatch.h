// Dtype x device dispatch, written once (in the spirit of PyTorch's
// AT_DISPATCH_FLOATING_TYPES plus a device switch).
//
// 1. Dtype only: run a generic lambda with `scalar_t` bound to the C++ type.
//      MN_DISPATCH_FLOAT(x.dtype(), "relu", [&] { ... scalar_t ... });
//    Unsupported dtypes throw mn::Error naming the op and the dtype.
//
// 2. A kernel pair NAME_cpu<T> / NAME_cuda<T> with the same arguments (the common
//    case): binds scalar_t from the tensor's dtype and picks the device.
//      MN_DISPATCH_KERNEL("relu", x, relu_forward, n, x.data<scalar_t>(), y.data<scalar_t>());
//    Inside an existing MN_DISPATCH_FLOAT (several calls under one dtype switch):
//      MN_DEVICE_CALL("relu", x.device(), relu_forward, n, ...);
//
// 3. Device code that is more than one call: put it in MN_CUDA_BRANCH.
//      if (dev.is_cuda()) {
//        MN_CUDA_BRANCH("mine_triplets", dev, d.dtype(), /* statements */);
//      } else { ... }
//    In a CUDA build the statements are compiled as written; in a CPU-only build
//    they are not compiled at all (the *_cuda launchers are not declared there)
//    and the branch throws instead.
//
// No silent fallback (conventions.md rule 8): a CUDA tensor never reaches a CPU
// kernel. A CPU-only build throws "this build has no CUDA kernels"; a CUDA
// tensor with no device present cannot exist (allocation already throws).
// An op that has no CUDA kernel yet calls mn::no_cuda_kernel(op, device, dtype).
#pragma once
#include <cstdint>

#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/error.h"

namespace mn {

// op: "<dtype> on <device> needs CUDA, but this build has no CUDA kernels".
[[noreturn]] inline void throw_no_cuda_build(const char* op, Device dev, DType dt) {
  MN_THROW(op, ": ", dtype_name(dt), " data on ", dev.str(),
           " needs CUDA, but this build has no CUDA kernels (configure with "
           "-DMN_ENABLE_CUDA=ON and nvcc installed); copy the inputs to the CPU explicitly "
           "to run there");
}

// For ops implemented only on the CPU so far: called on their CUDA branch.
[[noreturn]] inline void no_cuda_kernel(const char* op, Device dev, DType dt) {
  MN_THROW(op, ": no CUDA kernel for ", dtype_name(dt), " data on ", dev.str(),
           " (only a CPU implementation exists); copy the inputs to the CPU explicitly");
}

}  // namespace mn

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

// Statements that run on a CUDA device (see 3. above).
#ifdef MN_WITH_CUDA
#define MN_CUDA_BRANCH(opname, device, dtype, ...)             \
  do {                                                         \
    const ::mn::CudaDeviceScope mn_cuda_device_scope_(device); \
    __VA_ARGS__;                                               \
  } while (0)
#else
#define MN_CUDA_BRANCH(opname, device, dtype, ...) \
  ::mn::throw_no_cuda_build(opname, device, dtype)
#endif

// kernel##_cuda<scalar_t>(args) on a CUDA device, kernel##_cpu<scalar_t>(args)
// on the CPU; scalar_t must be bound (inside MN_DISPATCH_FLOAT).
#define MN_DEVICE_CALL(opname, device, kernel, ...)                                         \
  do {                                                                                      \
    const ::mn::Device mn_dispatch_dev_ = (device);                                         \
    if (mn_dispatch_dev_.is_cuda()) {                                                       \
      MN_CUDA_BRANCH(opname, mn_dispatch_dev_, ::mn::dtype_of<scalar_t>,                    \
                     kernel##_cuda<scalar_t>(__VA_ARGS__));                                 \
    } else {                                                                                \
      kernel##_cpu<scalar_t>(__VA_ARGS__);                                                  \
    }                                                                                       \
  } while (0)

// Float dtype switch on tensor t plus the device switch of MN_DEVICE_CALL.
#define MN_DISPATCH_KERNEL(opname, t, kernel, ...)                                 \
  MN_DISPATCH_FLOAT((t).dtype(), opname,                                           \
                    [&] { MN_DEVICE_CALL(opname, (t).device(), kernel, __VA_ARGS__); })
