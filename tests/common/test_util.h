// Shared test helpers: random tensors from a fixed seed, the one tolerance
// helper (|ref - x| <= atol + rtol * |ref|, printing the first mismatches),
// and the skip for GPU tests on machines without a GPU.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/tensor.h"

// GPU tests call this first: visible skip, never a silent pass.
#define MN_SKIP_IF_NO_CUDA()                                                          \
  do {                                                                                \
    if (!::mn::cuda_available())                                                      \
      GTEST_SKIP() << (::mn::cuda_compiled() ? "no CUDA device present: GPU test skipped" \
                                              : "built without CUDA: GPU test skipped"); \
  } while (0)

// Full-size (Koch-sized, batch 150) cases of the GPU parity tests are left out
// when MN_TEST_SHAPES=small is set: compute-sanitizer's racecheck and initcheck
// take minutes per such kernel, while the small and odd shapes beside them still
// run every kernel and every tile path. A test made only of full-size cases skips
// with a message.
#define MN_SKIP_IF_SMALL_SHAPES_ONLY()                                                        \
  do {                                                                                        \
    if (!::mn::test::full_size_shapes())                                                      \
      GTEST_SKIP() << "MN_TEST_SHAPES=small: this test has only full-size cases";            \
  } while (0)

namespace mn::test {

// Turns allocation poisoning (MN_POISON, runtime/allocator.h) on or off for a
// scope, restoring the previous setting at its end.
class PoisonScope {
 public:
  explicit PoisonScope(bool on);
  ~PoisonScope();
  PoisonScope(const PoisonScope&) = delete;
  PoisonScope& operator=(const PoisonScope&) = delete;

 private:
  bool saved_;
};

// False when MN_TEST_SHAPES=small (above).
bool full_size_shapes();
// `shapes` without those of more than 10^6 elements when !full_size_shapes().
std::vector<Shape> sized(std::vector<Shape> shapes);

// Uniform in [lo, hi) from std::mt19937_64(seed), created on the host then moved.
Tensor rand(const Shape& shape, double lo, double hi, DType dtype = DType::F64,
            Device device = Device::cpu(), uint64_t seed = 1);
// Standard normal from std::mt19937_64(seed).
Tensor randn(const Shape& shape, DType dtype = DType::F64, Device device = Device::cpu(),
             uint64_t seed = 1);
std::vector<double> rand_vec(int64_t n, double lo, double hi, uint64_t seed);

// Elementwise |ref - x| <= atol + rtol * |ref| (shapes must match; NaN never matches
// unless both are NaN). Any devices and dtypes; the message lists the first mismatches.
::testing::AssertionResult all_close(const Tensor& ref, const Tensor& x, double atol, double rtol);
::testing::AssertionResult all_close(const std::vector<double>& ref, const std::vector<double>& x,
                                     double atol, double rtol);

// For device-side index checks: `op` queues work with a bad index (nothing synchronises);
// the next device-to-host copy of its result must throw an error containing `what`,
// and the report must then be cleared (copying `probe` afterwards does not throw).
void expect_device_report(const std::function<Tensor()>& op, const std::string& what,
                          const Tensor& probe);

}  // namespace mn::test
