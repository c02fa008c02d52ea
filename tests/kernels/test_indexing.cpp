// Indexing and join kernels (kernels/indexing.h, kernels/join.h) against loops
// written here; error paths; CPU-vs-CUDA parity (skipped without a GPU).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "kernels/indexing.h"
#include "kernels/join.h"
#include "runtime/determinism.h"
#include "tests/common/test_util.h"

using namespace mn;
namespace K = mn::kernels;

TEST(Indexing, IndexSelectAndIndexAdd) {
  Tensor x = test::randn({3, 4, 5}, DType::F64, Device::cpu(), 1);
  Tensor idx = Tensor::from_vector<int64_t>({3, 0, 3}, {3});
  Tensor y = K::index_select(x, 1, idx);
  ASSERT_EQ(y.shape(), (Shape{3, 3, 5}));
  auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  const int64_t id[3] = {3, 0, 3};
  for (int a = 0; a < 3; ++a)
    for (int j = 0; j < 3; ++j)
      for (int c = 0; c < 5; ++c) EXPECT_EQ(yv[(a * 3 + j) * 5 + c], xv[(a * 4 + id[j]) * 5 + c]);
  // int32 indices, dim 0, float32 and int64 payloads
  Tensor i32 = Tensor::from_vector<int32_t>({1, 1}, {2});
  EXPECT_EQ(K::index_select(Tensor::arange(6).view({3, 2}), 0, i32).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 3, 2, 3}));
  // index_add: repeated index 3 accumulates both slices
  Tensor g = test::randn({3, 3, 5}, DType::F64, Device::cpu(), 2);
  auto gv = g.to_vector<double>();
  auto r = K::index_add({3, 4, 5}, 1, idx, g).to_vector<double>();
  std::vector<double> ref(60, 0.0);
  for (int a = 0; a < 3; ++a)
    for (int j = 0; j < 3; ++j)
      for (int c = 0; c < 5; ++c) ref[(a * 4 + id[j]) * 5 + c] += gv[(a * 3 + j) * 5 + c];
  EXPECT_TRUE(test::all_close(ref, r, 1e-15, 0));
  EXPECT_THROW(K::index_select(x, 1, Tensor::from_vector<int64_t>({4}, {1})), Error);
  EXPECT_THROW(K::index_select(x, 1, Tensor::zeros({2}, DType::F32)), Error);
}

TEST(Indexing, GatherScatterAdd) {
  Tensor x = test::randn({4, 6}, DType::F64, Device::cpu(), 3);
  Tensor idx = Tensor::from_vector<int64_t>({5, 0, 5, 1, 2, 3, 0, 0, 4, 4, 4, 1}, {4, 3});
  auto xv = x.to_vector<double>();
  auto iv = idx.to_vector<int64_t>();
  auto y = K::gather(x, 1, idx).to_vector<double>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(y[i * 3 + j], xv[i * 6 + iv[i * 3 + j]]);
  // gather along dim 0 on a non-contiguous input
  Tensor xt = x.t();  // (6, 4)
  Tensor idx0 = Tensor::from_vector<int64_t>({5, 0, 1, 2, 3, 3, 3, 3}, {2, 4});
  auto y0 = K::gather(xt, 0, idx0).to_vector<double>();
  auto i0 = idx0.to_vector<int64_t>();
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(y0[r * 4 + c], xv[c * 6 + i0[r * 4 + c]]);
  // scatter_add with repeated indices
  Tensor self = test::randn({4, 6}, DType::F64, Device::cpu(), 4);
  Tensor src = test::randn({4, 3}, DType::F64, Device::cpu(), 5);
  auto ref = self.to_vector<double>();
  auto sv = src.to_vector<double>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) ref[i * 6 + iv[i * 3 + j]] += sv[i * 3 + j];
  EXPECT_TRUE(test::all_close(ref, K::scatter_add(self, 1, idx, src).to_vector<double>(), 1e-15, 0));
  EXPECT_THROW(K::gather(x, 1, Tensor::zeros({4}, DType::I64)), Error);
  EXPECT_THROW(K::gather(x, 1, Tensor::full({4, 1}, 6, DType::I64)), Error);
}

TEST(Indexing, WhereBroadcasts) {
  Tensor cond = Tensor::from_vector<uint8_t>({1, 0, 1}, {3});
  Tensor a = test::randn({2, 3}, DType::F64, Device::cpu(), 6);
  Tensor b = Tensor::full({2, 1}, -7.0, DType::F64);
  auto r = K::where(cond, a, b).to_vector<double>();
  auto av = a.to_vector<double>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(r[i * 3 + j], j != 1 ? av[i * 3 + j] : -7.0);
  EXPECT_THROW(K::where(cond, a, Tensor::zeros({2, 3}, DType::F32)), Error);
  EXPECT_THROW(K::where(Tensor::zeros({4}, DType::U8), a, a), Error);
}

TEST(Indexing, MaskedSelectAndScatter) {
  Tensor x = test::randn({3, 4}, DType::F64, Device::cpu(), 7);
  Tensor mask = Tensor::from_vector<uint8_t>({0, 1, 1, 0}, {4});  // broadcast over rows
  auto y = K::masked_select(x, mask);
  ASSERT_EQ(y.shape(), (Shape{6}));
  auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  int c = 0;
  for (int i = 0; i < 3; ++i)
    for (int j = 1; j < 3; ++j) EXPECT_EQ(yv[c++], xv[i * 4 + j]);
  Tensor m2 = mask.expand({3, 4});
  auto back = K::masked_scatter(m2, y).to_vector<double>();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(back[i * 4 + j], (j == 1 || j == 2) ? xv[i * 4 + j] : 0.0);
  EXPECT_EQ(K::masked_select(x, Tensor::zeros({4}, DType::U8)).numel(), 0);
  EXPECT_THROW(K::masked_scatter(m2, Tensor::zeros({5}, DType::F64)), Error);
}

TEST(Join, ConcatSplitStack) {
  Tensor a = test::randn({2, 3, 4}, DType::F64, Device::cpu(), 8);
  Tensor b = test::randn({2, 1, 4}, DType::F64, Device::cpu(), 9);
  Tensor c = K::concat({a, b, a}, 1);
  ASSERT_EQ(c.shape(), (Shape{2, 7, 4}));
  auto parts = K::split(c, {3, 1, 3}, 1);
  EXPECT_TRUE(parts[0].shares_storage(c));
  EXPECT_TRUE(test::all_close(a, parts[0], 0, 0));
  EXPECT_TRUE(test::all_close(b, parts[1], 0, 0));
  EXPECT_TRUE(test::all_close(a, parts[2], 0, 0));
  Tensor s = K::stack({a, a.transpose(0, 2).transpose(0, 2)}, 3);
  ASSERT_EQ(s.shape(), (Shape{2, 3, 4, 2}));
  auto av = a.to_vector<double>(), sv = s.to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i) {
    EXPECT_EQ(sv[2 * i], av[i]);
    EXPECT_EQ(sv[2 * i + 1], av[i]);
  }
  EXPECT_EQ(K::concat({Tensor::arange(3), Tensor::arange(2)}, 0).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 2, 0, 1}));
  try {
    K::concat({a, Tensor::zeros({2, 3, 5}, DType::F64)}, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 3, 5)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(K::split(c, {3, 3}, 1), Error);
  EXPECT_THROW(K::concat({a, b.to(DType::F32)}, 1), Error);
}

// Parity: pure data movement and exact-order scatters must match exactly for
// distinct indices; atomics with repeated indices add in another order: rtol 1e-12 (double).
TEST(IndexingCuda, Parity) {
  MN_SKIP_IF_NO_CUDA();
  for (DType dt : {DType::F32, DType::F64}) {
    const double rtol = dt == DType::F64 ? 1e-12 : 1e-5;
    Tensor x = test::randn({50, 70, 3}, dt, Device::cpu(), 10);
    Tensor idx = Tensor::from_vector<int64_t>({0, 69, 3, 3, 12, 50, 1}, {7});
    EXPECT_TRUE(test::all_close(K::index_select(x, 1, idx), K::index_select(x.cuda(), 1, idx.cuda()), 0, 0));
    Tensor g = test::randn({50, 7, 3}, dt, Device::cpu(), 11);
    EXPECT_TRUE(test::all_close(K::index_add({50, 70, 3}, 1, idx, g),
                                K::index_add({50, 70, 3}, 1, idx.cuda(), g.cuda()), 1e-6, rtol));
    Tensor gi = K::index_select(Tensor::arange(70).view({1, 70, 1}).expand({50, 70, 3}).contiguous(), 1,
                                Tensor::from_vector<int64_t>({5, 5, 9}, {3}));
    EXPECT_TRUE(test::all_close(K::gather(x, 1, gi), K::gather(x.cuda(), 1, gi.cuda()), 0, 0));
    Tensor src = test::randn({50, 3, 3}, dt, Device::cpu(), 12);
    EXPECT_TRUE(test::all_close(K::scatter_add(x, 1, gi, src), K::scatter_add(x.cuda(), 1, gi.cuda(), src.cuda()), 1e-6, rtol));
    Tensor m = K::index_select(Tensor::from_vector<uint8_t>({0, 1, 1}, {3}), 0,
                               Tensor::from_vector<int64_t>(std::vector<int64_t>(10500, 1), {10500}));
    Tensor big = test::randn({10500}, dt, Device::cpu(), 13);
    Tensor mask = Tensor::zeros({10500}, DType::U8);
    Tensor rm = Tensor::from_vector<uint8_t>([] { std::vector<uint8_t> v(10500); for (size_t i = 0; i < v.size(); ++i) v[i] = (i * 7919) % 3 == 0; return v; }(), {10500});
    Tensor s1 = K::masked_select(big, rm), s2 = K::masked_select(big.cuda(), rm.cuda());
    EXPECT_TRUE(test::all_close(s1, s2, 0, 0));
    EXPECT_TRUE(test::all_close(K::masked_scatter(rm, s1), K::masked_scatter(rm.cuda(), s2), 0, 0));
    EXPECT_EQ(K::masked_select(big.cuda(), mask.cuda()).numel(), 0);
    EXPECT_EQ(K::masked_select(big.cuda(), m.cuda()).numel(), 10500);
    Tensor cond = rm.view({105, 100});
    Tensor a = big.view({105, 100}), b = test::randn({100}, dt, Device::cpu(), 15);
    EXPECT_TRUE(test::all_close(K::where(cond, a, b), K::where(cond.cuda(), a.cuda(), b.cuda()), 0, 0));
    EXPECT_TRUE(test::all_close(K::concat({x, x.narrow(1, 0, 5)}, 1),
                                K::concat({x.cuda(), x.cuda().narrow(1, 0, 5)}, 1), 0, 0));
    EXPECT_TRUE(test::all_close(K::stack({x, x}, 0), K::stack({x.cuda(), x.cuda()}, 0), 0, 0));
  }
}

// A bad index on the GPU touches nothing out of bounds and is raised as a clear error
// (op, index, bound) at the host's next synchronisation point, without a sync per op;
// the record is then cleared and the device stays usable.
TEST(IndexingCuda, BadIndicesAreReportedAtTheNextSync) {
  MN_SKIP_IF_NO_CUDA();
  const Device d = Device::cuda();
  const Tensor x = test::randn({4, 5}, DType::F32, d, 20);
  auto idx = [&](std::vector<int64_t> v, Shape s) { return Tensor::from_vector<int64_t>(v, s).to(d); };
  auto expect_report = [&](const std::function<Tensor()>& op, const std::string& what) {
    test::expect_device_report(op, what, x);
  };
  expect_report([&] { return K::index_select(x, 1, idx({0, 7}, {2})); },
                "index_select (cuda:0): index 7 is out of range [0, 5)");
  expect_report([&] { return K::index_add({4, 5}, 1, idx({-1}, {1}), Tensor::ones({4, 1}, DType::F32, d)); },
                "index_add (cuda:0): index -1 is out of range [0, 5)");
  expect_report([&] { return K::gather(x, 1, idx({0, 9, 1, 2}, {4, 1})); },
                "gather (cuda:0): index 9 is out of range [0, 5)");
  expect_report([&] {
    return K::scatter_add(Tensor::zeros({4, 5}, DType::F32, d), 1, idx({5, 0, 0, 0}, {4, 1}),
                          Tensor::ones({4, 1}, DType::F32, d));
  }, "scatter_add (cuda:0): index 5 is out of range [0, 5)");
  // Valid indices after the reports: the right values.
  EXPECT_TRUE(test::all_close(K::index_select(x.cpu(), 1, Tensor::from_vector<int64_t>({4, 0}, {2})),
                              K::index_select(x, 1, idx({4, 0}, {2})).cpu(), 0, 0));
}

// Deterministic mode refuses the CUDA ops that add with float atomics, before any launch;
// the CPU versions (fixed order) still run.
TEST(IndexingCuda, DeterministicModeRefusesAtomicScatters) {
  MN_SKIP_IF_NO_CUDA();
  const bool saved = deterministic();
  set_deterministic(true);
  const Device d = Device::cuda();
  const Tensor idx = Tensor::from_vector<int64_t>({0, 2}, {2});
  const Tensor g = Tensor::ones({4, 2}, DType::F32);
  EXPECT_THROW(K::index_add({4, 5}, 1, idx.to(d), g.to(d)), Error);
  EXPECT_NO_THROW(K::index_add({4, 5}, 1, idx, g));
  set_deterministic(saved);
}
