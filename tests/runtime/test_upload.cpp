// Host -> device uploads through the pinned staging ring (runtime/upload.h):
// many uploads of changing sizes, more than the ring holds, each consumed by a
// kernel queued behind it while the next ones are staged, arrive intact; the
// source may be overwritten as soon as the call returns; small copies do not
// wait for the device and large ones do. GPU only (skips without one).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/upload.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

TEST(Upload, CudaStagedUploadsArriveIntactThroughTheRing) {
  MN_SKIP_IF_NO_CUDA();
  const UploadStats before = upload_stats();
  std::vector<Tensor> sums;
  std::vector<double> expected;
  std::vector<float> host;
  for (int k = 0; k < 5 * kUploadSlots; ++k) {
    const int64_t n = 1 + (k * 7919) % 300000;  // up to 1.2 MB, slots grow and are reused
    host.assign(static_cast<size_t>(n), 0.f);
    for (int64_t i = 0; i < n; ++i) host[static_cast<size_t>(i)] = static_cast<float>((i + k) % 13);
    Tensor d = Tensor::from_vector(host, {n}, Device::cuda(0));
    host.assign(host.size(), -1.f);  // the caller's buffer is free at once
    // A kernel that reads the upload (a converting copy), queued before the next uploads are staged.
    sums.push_back(d.to(DType::F64));
    double e = 0;
    for (int64_t i = 0; i < n; ++i) e += static_cast<double>((i + k) % 13);
    expected.push_back(e);
  }
  for (size_t k = 0; k < sums.size(); ++k) {
    double got = 0;
    for (double v : sums[k].to_double_vector()) got += v;
    EXPECT_EQ(got, expected[k]) << "upload " << k;
  }
  const UploadStats after = upload_stats();
  EXPECT_EQ(after.staged - before.staged, static_cast<uint64_t>(5 * kUploadSlots));
  EXPECT_EQ(after.waited, before.waited);
}

TEST(Upload, CudaLargeUploadsWaitAndArriveIntact) {
  MN_SKIP_IF_NO_CUDA();
  const int64_t n = static_cast<int64_t>(kUploadStagedMax / sizeof(int32_t)) + 5;
  std::vector<int32_t> host(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) host[static_cast<size_t>(i)] = static_cast<int32_t>(i * 3);
  const UploadStats before = upload_stats();
  Tensor d = Tensor::from_vector(host, {n}).to(Device::cuda(0));
  EXPECT_EQ(upload_stats().waited - before.waited, 1u);
  EXPECT_EQ(d.to_vector<int32_t>(), host);
}

}  // namespace
}  // namespace mn
