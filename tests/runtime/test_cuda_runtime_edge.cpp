// Edge cases of the runtime's CUDA kernels (runtime/cuda/copy.cu, rng.cu) against
// the CPU: dtype-converting copies from and into non-contiguous and broadcast
// views, fills of strided views, element counts beyond one full grid of the
// grid-stride loops, and Philox fills of 1..5 elements whose block counter
// crosses 2^32 (the counter's high word). Each check takes the device it compares
// with the CPU; SelfCheckOnCpu runs them CPU-vs-CPU so the test code itself is
// exercised on machines without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/rng.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

// Byte-for-byte equality of two tensors' contiguous host copies (dtype and shape first).
::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return ::testing::AssertionFailure() << a.desc() << " vs " << b.desc();
  Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  if (x.nbytes() && std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) != 0)
    return ::testing::AssertionFailure() << "bits differ: " << a.desc();
  return ::testing::AssertionSuccess();
}

void strided_copies(Device dev) {
  // Values exactly representable in every target dtype, so the conversions are exact.
  std::vector<double> v(5 * 7 * 3);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<int>(i % 97) - 40);
  Tensor h = Tensor::from_vector(v, {5, 7, 3});
  Tensor d = h.to(dev);
  for (DType to : {DType::F32, DType::F64, DType::I32, DType::I64}) {
    SCOPED_TRACE(dtype_name(to));
    // Non-contiguous source, converting copy (Tensor::to(DType) on a permuted view).
    EXPECT_TRUE(same_bits(h.permute({2, 0, 1}).to(to), d.permute({2, 0, 1}).to(to)));
    // Non-contiguous destination, broadcast source of another dtype.
    Tensor dst_c = Tensor::zeros({7, 5}, to), dst_d = Tensor::zeros({7, 5}, to, dev);
    Tensor row = h.select(0, 1).select(1, 1);  // (7): stride 3
    dst_c.t().narrow(0, 1, 3).copy_(row.expand({3, 7}));
    dst_d.t().narrow(0, 1, 3).copy_(row.to(dev).expand({3, 7}));
    EXPECT_TRUE(same_bits(dst_c, dst_d));
  }
  // uint8 in and out.
  Tensor u = h.narrow(2, 0, 1).to(DType::I64);
  Tensor u8 = Tensor::from_vector(std::vector<uint8_t>{0, 1, 200, 255}, {4});
  EXPECT_TRUE(same_bits(u8.to(DType::F32), u8.to(dev).to(DType::F32)));
  EXPECT_TRUE(same_bits(u.transpose(0, 1).contiguous(), u.to(dev).transpose(0, 1).contiguous()));
  // Fills of strided views leave the other elements alone.
  Tensor fc = Tensor::zeros({6, 9}, DType::F32), fd = Tensor::zeros({6, 9}, DType::F32, dev);
  fc.narrow(1, 2, 4).t().fill_(-2.5);
  fd.narrow(1, 2, 4).t().fill_(-2.5);
  EXPECT_TRUE(same_bits(fc, fd));
  // One element and zero elements.
  EXPECT_TRUE(same_bits(Tensor::full({1}, 3.0, DType::F64).to(DType::F32),
                        Tensor::full({1}, 3.0, DType::F64, dev).to(DType::F32)));
  Tensor e = Tensor::empty({0, 4}, DType::F32, dev);
  e.fill_(1.0);
  e.copy_(Tensor::zeros({4}, DType::F64));
  EXPECT_EQ(e.permute({1, 0}).contiguous().numel(), 0);
}

// More elements than one grid covers (grid_for caps at 65535 * 8 blocks of 256
// threads = 134,215,680), so the grid-stride loops must take a second lap.
void beyond_one_grid(Device dev) {
  const int64_t n = 65535LL * 8 * 256 + 1000;
  Tensor t = Tensor::zeros({n}, DType::U8, dev);
  t.fill_(7);
  t.narrow(0, n - 3, 3).copy_(Tensor::full({3}, 9, DType::I64));  // converting copy at the end
  std::vector<uint8_t> h = t.to_vector<uint8_t>();
  int64_t bad = 0;
  for (int64_t i = 0; i < n - 3; ++i) bad += h[static_cast<size_t>(i)] != 7;
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(h[static_cast<size_t>(n - 1)], 9);
  EXPECT_EQ(h[static_cast<size_t>(n - 3)], 9);
}

// Philox fills of a few elements (partial blocks) with the block counter crossing
// 2^32: bit-identical on both devices, and the generator advanced the same way.
void philox_small_fills(Device dev) {
  const uint64_t start = (uint64_t{1} << 32) - 2;
  for (int64_t n : {1, 2, 3, 5, 9}) {
    SCOPED_TRACE(n);
    Generator gc(0x1234567890abcdefull, start), gd(0x1234567890abcdefull, start);
    for (DType dt : {DType::F32, DType::F64}) {
      Tensor c = Tensor::empty({n}, dt), d = Tensor::empty({n}, dt, dev);
      uniform_(c, -1.0, 3.0, gc);
      uniform_(d, -1.0, 3.0, gd);
      EXPECT_TRUE(same_bits(c, d));
      normal_(c, 0.5, 2.0, gc);
      normal_(d, 0.5, 2.0, gd);
      EXPECT_TRUE(same_bits(c, d));
    }
    Tensor bc = Tensor::empty({n}, DType::U8), bd = Tensor::empty({n}, DType::U8, dev);
    bernoulli_(bc, 0.5, gc);
    bernoulli_(bd, 0.5, gd);
    EXPECT_TRUE(same_bits(bc, bd));
    Tensor ic = Tensor::empty({n}, DType::I64), id = Tensor::empty({n}, DType::I64, dev);
    randint_(ic, -5, 1LL << 40, gc);  // range > 2^32: two lanes per element
    randint_(id, -5, 1LL << 40, gd);
    EXPECT_TRUE(same_bits(ic, id));
    EXPECT_EQ(gc.offset(), gd.offset());
  }
}

TEST(CudaRuntimeEdge, SelfCheckOnCpu) {
  strided_copies(Device::cpu());
  beyond_one_grid(Device::cpu());
  philox_small_fills(Device::cpu());
}

TEST(CudaRuntimeEdge, StridedConvertingCopiesAndFills) {
  MN_SKIP_IF_NO_CUDA();
  strided_copies(Device::cuda());
}

TEST(CudaRuntimeEdge, FillAndCopyBeyondOneGrid) {
  MN_SKIP_IF_NO_CUDA();
  beyond_one_grid(Device::cuda());
}

TEST(CudaRuntimeEdge, PhiloxPartialBlocksAcross2To32) {
  MN_SKIP_IF_NO_CUDA();
  philox_small_fills(Device::cuda());
}

}  // namespace
}  // namespace mn
