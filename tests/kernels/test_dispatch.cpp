// The dtype x device dispatch of runtime/dispatch.h, on probe kernels defined
// here: CPU tensors reach the CPU kernel with the right scalar_t; unsupported
// dtypes throw naming the op and the dtype; a CUDA device never reaches the CPU
// kernel -- in a CUDA build it reaches the CUDA launcher (a host function here,
// so no GPU is needed), in a CPU-only build it throws naming the op, dtype and
// device. Runs on every machine (nothing here needs a GPU).
#include <gtest/gtest.h>

#include <string>

#include "kernels/gemm.h"
#include "runtime/device.h"
#include "runtime/dispatch.h"
#include "runtime/tensor.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

struct Hit {
  int where = 0;  // 1: CPU kernel, 2: CUDA launcher
  DType seen = DType::U8;
  int tag = 0;    // the second argument, passed through
};

template <typename T>
void probe_cpu(Hit* h, int tag) {
  h->where = 1;
  h->tag = tag;
  h->seen = dtype_of<T>;
}
#ifdef MN_WITH_CUDA
template <typename T>
void probe_cuda(Hit* h, int tag) {
  h->where = 2;
  h->tag = tag;
  h->seen = dtype_of<T>;
}
#endif

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

TEST(DispatchTest, CpuTensorsReachTheCpuKernelWithTheirDtype) {
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor t = Tensor::zeros({3}, dt);
    Hit h;
    MN_DISPATCH_KERNEL("probe_op", t, probe, &h, 7);
    EXPECT_EQ(h.where, 1);
    EXPECT_EQ(h.seen, dt);
    EXPECT_EQ(h.tag, 7);
  }
}

TEST(DispatchTest, UnsupportedDtypeNamesTheOpAndTheDtype) {
  Tensor t = Tensor::zeros({3}, DType::I64);
  Hit h;
  try {
    MN_DISPATCH_KERNEL("probe_op", t, probe, &h, 7);
    FAIL() << "int64 was dispatched";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "probe_op")) << e.what();
    EXPECT_TRUE(contains(e.what(), "int64")) << e.what();
  }
  EXPECT_EQ(h.where, 0);
}

// The device switch alone (MN_DEVICE_CALL), with a CUDA device value: no tensor
// needs to exist on it, so this runs without a GPU in both build kinds.
TEST(DispatchTest, CudaDeviceNeverFallsBackToTheCpuKernel) {
  Hit h;
  bool threw = false;
  std::string msg;
  try {
    MN_DISPATCH_FLOAT(DType::F32, "probe_op",
                      [&] { MN_DEVICE_CALL("probe_op", Device::cuda(0), probe, &h, 7); });
  } catch (const Error& e) {
    threw = true;
    msg = e.what();
  }
  EXPECT_NE(h.where, 1) << "a CUDA device reached the CPU kernel";
#ifdef MN_WITH_CUDA
  EXPECT_FALSE(threw) << msg;
  EXPECT_EQ(h.where, 2);
  EXPECT_EQ(h.seen, DType::F32);
  EXPECT_EQ(h.tag, 7);
#else
  ASSERT_TRUE(threw);
  EXPECT_TRUE(contains(msg, "probe_op")) << msg;
  EXPECT_TRUE(contains(msg, "float32")) << msg;
  EXPECT_TRUE(contains(msg, "cuda:0")) << msg;
  EXPECT_TRUE(contains(msg, "no CUDA kernels")) << msg;
#endif
}

TEST(DispatchTest, CudaBranchRunsOnlyInCudaBuilds) {
  int ran = 0;
  bool threw = false;
  try {
    MN_CUDA_BRANCH("probe_branch", Device::cuda(1), DType::F64, {
      ++ran;
      ran += 10;
    });
  } catch (const Error& e) {
    threw = true;
    EXPECT_TRUE(contains(e.what(), "probe_branch")) << e.what();
    EXPECT_TRUE(contains(e.what(), "cuda:1")) << e.what();
    EXPECT_TRUE(contains(e.what(), "float64")) << e.what();
  }
#ifdef MN_WITH_CUDA
  EXPECT_FALSE(threw);
  EXPECT_EQ(ran, 11);
#else
  EXPECT_TRUE(threw);
  EXPECT_EQ(ran, 0);
#endif
}

TEST(DispatchTest, MissingCudaKernelIsAnErrorNamingOpDtypeAndDevice) {
  try {
    no_cuda_kernel("probe_cpu_only_op", Device::cuda(0), DType::F32);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "probe_cpu_only_op")) << e.what();
    EXPECT_TRUE(contains(e.what(), "no CUDA kernel")) << e.what();
    EXPECT_TRUE(contains(e.what(), "float32")) << e.what();
    EXPECT_TRUE(contains(e.what(), "cuda:0")) << e.what();
  }
}

// The device scope of every CUDA entry point (runtime/device.h, MN_CUDA_BRANCH): ops run
// on their tensors' device and leave the caller's current device as it was.
TEST(DeviceScope, NoCurrentDeviceWithoutAGpu) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present: this tests the no-GPU path";
  EXPECT_EQ(cuda_current_device(), -1);
  const CudaDeviceScope scope(Device::cuda(0));  // nothing to switch to: no throw, no effect
  EXPECT_EQ(cuda_current_device(), -1);
}

TEST(DeviceScopeCuda, OpsOnTheSecondGpuLeaveTheFirstCurrent) {
  MN_SKIP_IF_NO_CUDA();
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs two GPUs (" << cuda_device_count() << " present): the one-GPU case is every other GPU test";
  ASSERT_EQ(cuda_current_device(), 0);
  const Device d1 = Device::cuda(1);
  const Tensor a = test::randn({33, 20}, DType::F32, Device::cpu(), 3);
  const Tensor b = test::randn({20, 17}, DType::F32, Device::cpu(), 4);
  const Tensor c = kernels::matmul(a.to(d1), b.to(d1));
  EXPECT_EQ(c.device(), d1);
  EXPECT_EQ(cuda_current_device(), 0) << "an op on cuda:1 left cuda:1 current";
  EXPECT_TRUE(test::all_close(kernels::matmul(a, b), c.cpu(), 1e-4, 1e-4));
  EXPECT_EQ(cuda_current_device(), 0);
}

}  // namespace
}  // namespace mn

