// Tensor basics: construction, views share storage, copies, dtype conversion,
// printing, and the error paths of shape/dtype/device mismatches.
#include <gtest/gtest.h>

#include "runtime/allocator.h"
#include "runtime/tensor.h"
#include "tests/common/test_util.h"

using namespace mn;

TEST(Tensor, FromVectorRoundTrip) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::from_vector(v, {2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.to_vector<float>(), v);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
}

TEST(Tensor, ViewsShareStorageAndCopyNothing) {
  Tensor t = Tensor::from_vector(std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  Tensor tr = t.transpose(0, 1);
  EXPECT_TRUE(tr.shares_storage(t));
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(tr.shape(), (Shape{4, 3}));
  EXPECT_EQ(tr.contiguous().to_vector<double>(),
            (std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  Tensor n = t.narrow(1, 1, 2);
  EXPECT_EQ(n.to_vector<double>(), (std::vector<double>{1, 2, 5, 6, 9, 10}));
  Tensor s = t.slice(1, 0, 4, 2);
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  Tensor sel = t.select(0, 2);
  EXPECT_EQ(sel.to_vector<double>(), (std::vector<double>{8, 9, 10, 11}));
  Tensor v = t.view({2, -1});
  EXPECT_EQ(v.shape(), (Shape{2, 6}));
  EXPECT_TRUE(v.shares_storage(t));
  Tensor p = t.reshape({2, 2, 3}).permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(p.contiguous().to_vector<double>()[1], 3.0);
  // Writing through a view changes the base.
  n.fill_(-1);
  EXPECT_EQ(t.to_vector<double>()[1], -1.0);
  EXPECT_EQ(t.to_vector<double>()[0], 0.0);
}

TEST(Tensor, ExpandBroadcastsWithZeroStride) {
  Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor e = t.expand({2, 3});
  EXPECT_EQ(e.strides(), (Shape{0, 1}));
  EXPECT_EQ(e.contiguous().to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  Tensor col = Tensor::from_vector(std::vector<float>{1, 2}, {2, 1}).expand({2, 3});
  EXPECT_EQ(col.contiguous().to_vector<float>(), (std::vector<float>{1, 1, 1, 2, 2, 2}));
  EXPECT_THROW(t.expand({2, 4}), Error);
}

TEST(Tensor, SqueezeUnsqueezeFlatten) {
  Tensor t = Tensor::zeros({2, 3, 4});
  EXPECT_EQ(t.unsqueeze(0).shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(t.unsqueeze(-1).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(t.unsqueeze(1).squeeze(1).shape(), t.shape());
  EXPECT_EQ(t.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(t.flatten().shape(), (Shape{24}));
  EXPECT_THROW(t.squeeze(0), Error);
}

TEST(Tensor, DtypeConversion) {
  Tensor t = Tensor::from_vector(std::vector<double>{1.7, -2.2, 3.0}, {3});
  EXPECT_EQ(t.to(DType::I32).to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(t.to(DType::F32).to_vector<float>()[0], 1.7f);
  Tensor u = Tensor::from_vector(std::vector<uint8_t>{0, 128, 255}, {3});
  EXPECT_EQ(u.to(DType::F64).to_vector<double>(), (std::vector<double>{0, 128, 255}));
}

TEST(Tensor, CopyBroadcastAndCloneIndependence) {
  Tensor a = Tensor::zeros({2, 3}, DType::F64);
  a.copy_(Tensor::from_vector(std::vector<double>{1, 2, 3}, {3}));
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  Tensor c = a.clone();
  c.fill_(7);
  EXPECT_EQ(a.to_vector<double>()[0], 1.0);
  EXPECT_FALSE(c.shares_storage(a));
}

TEST(Tensor, FactoriesAndItem) {
  EXPECT_EQ(Tensor::ones({2, 2}).to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
  EXPECT_EQ(Tensor::full({3}, 2.5, DType::F64).to_vector<double>(), (std::vector<double>{2.5, 2.5, 2.5}));
  EXPECT_EQ(Tensor::arange(4).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_DOUBLE_EQ(Tensor::scalar(4.25, DType::F64).item(), 4.25);
  EXPECT_THROW(Tensor::zeros({2}).item(), Error);
}

TEST(Tensor, PrintingIsReadable) {
  Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  std::string s = t.str();
  EXPECT_NE(s.find("[[1, 2]"), std::string::npos) << s;
  EXPECT_NE(s.find("shape=(2, 2)"), std::string::npos) << s;
  EXPECT_NE(s.find("float32"), std::string::npos) << s;
  Tensor big = Tensor::zeros({100});
  EXPECT_NE(big.str().find("..."), std::string::npos);
}

TEST(TensorErrors, MismatchesThrowWithShapes) {
  Tensor a = Tensor::zeros({2, 3});
  Tensor b = Tensor::zeros({3, 2}, DType::F64);
  try {
    check_same_shape("myop", a, b);
    FAIL() << "no throw";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("myop"), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 3)"), std::string::npos) << m;
    EXPECT_NE(m.find("(3, 2)"), std::string::npos) << m;
    EXPECT_NE(m.find("tensor.cpp:"), std::string::npos) << m;  // file:line of the check
  }
  EXPECT_THROW(check_same_dtype("myop", a, b), Error);
  EXPECT_THROW(a.view({4, 2}), Error);
  EXPECT_THROW(a.transpose(0, 1).view({6}), Error);
  EXPECT_NO_THROW(a.transpose(0, 1).reshape({6}));
  EXPECT_THROW(a.narrow(1, 2, 2), Error);
  EXPECT_THROW(a.permute({0, 0}), Error);
  EXPECT_THROW(Tensor::from_vector(std::vector<float>{1, 2}, {3}), Error);
  EXPECT_THROW(a.to_vector<double>(), Error);
  EXPECT_THROW(broadcast_shapes({2, 3}, {4}, "add"), Error);
  EXPECT_EQ(broadcast_shapes({2, 1, 3}, {4, 1}, "add"), (Shape{2, 4, 3}));
}

TEST(TensorErrors, CudaTensorWithoutDeviceThrowsClearly) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present: this tests the no-GPU path";
  try {
    Tensor::zeros({2}, DType::F32, Device::cuda(0));
    FAIL() << "no throw";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_TRUE(m.find("CUDA") != std::string::npos) << m;
  }
  EXPECT_THROW(check_cuda_usable("op", Tensor::zeros({1})), Error);
}

TEST(Device, ParseAndQueryNeverCrash) {
  EXPECT_TRUE(parse_device("cpu").is_cpu());
  EXPECT_EQ(parse_device("cuda:1").index, 1);
  EXPECT_THROW(parse_device("gpu"), Error);
  EXPECT_THROW(parse_device("cuda:x"), Error);
  EXPECT_GE(cuda_device_count(), 0);
  EXPECT_EQ(cuda_available(), cuda_device_count() > 0);
}

// --------------------------------------------------------------- GPU side --
TEST(TensorCuda, RoundTripAndStridedCopyParity) {
  MN_SKIP_IF_NO_CUDA();
  Tensor h = test::rand({5, 7, 3}, -1, 1, DType::F32);
  Tensor d = h.cuda();
  EXPECT_TRUE(d.is_cuda());
  EXPECT_EQ(d.cpu().to_vector<float>(), h.to_vector<float>());
  Tensor dp = d.permute({2, 0, 1}).contiguous();
  EXPECT_EQ(dp.cpu().to_vector<float>(), h.permute({2, 0, 1}).contiguous().to_vector<float>());
  EXPECT_EQ(d.to(DType::F64).cpu().to_vector<double>(), h.to(DType::F64).to_vector<double>());
  Tensor e = Tensor::zeros({4, 3}, DType::F32, Device::cuda());
  e.copy_(Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}));  // host -> device broadcast
  EXPECT_EQ(e.cpu().to_vector<float>(), Tensor::from_vector(std::vector<float>{1, 2, 3}, {3})
                                            .expand({4, 3}).contiguous().to_vector<float>());
}

TEST(TensorCuda, TransfersAreCounted) {
  MN_SKIP_IF_NO_CUDA();
  reset_transfer_stats();
  Tensor d = Tensor::ones({1000}).cuda();
  (void)d.cpu();
  TransferStats s = transfer_stats();
  EXPECT_EQ(s.h2d_copies, 1u);
  EXPECT_EQ(s.d2h_copies, 1u);
  EXPECT_EQ(s.h2d_bytes, 4000u);
}
