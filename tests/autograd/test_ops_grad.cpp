// Float64 gradient checks (ag::gradcheck, central differences) for every
// differentiable op in autograd/ops.h, including broadcasting, scalar forms,
// dims/keepdim variants and view ops; a Variable used twice receives both
// contributions; errors surface as mn::Error; the same checks on CUDA when present.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tests/common/test_util.h"

using namespace mn;
using namespace mn::ag;
using VV = std::vector<Variable>;
using Fn = std::function<Variable(const VV&)>;

namespace {
Device g_dev = Device::cpu();  // switched to CUDA by the GPU test

Tensor R(const Shape& s, uint64_t seed, double lo = -2, double hi = 2) {
  return test::rand(s, lo, hi, DType::F64, g_dev, seed);
}
// Inputs away from zero and from each other, for max/min/abs (kinks skipped anyway).
Tensor Rdistinct(const Shape& s, uint64_t seed) {
  std::vector<double> v(numel_of(s));
  auto r = test::rand_vec(numel_of(s), 0, 1, seed);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (static_cast<double>(i) * 0.37 + 0.5 + 0.011 * static_cast<double>(seed % 7)) * (r[i] < 0.5 ? -1 : 1);
  // shuffle deterministically
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<size_t>(r[i - 1] * i)]);
  return Tensor::from_vector<double>(v, s, g_dev);
}

::testing::AssertionResult check(const Fn& f, const std::vector<Tensor>& in,
                                 GradcheckOptions opts = {}) {
  GradcheckResult r = gradcheck(f, in, opts);
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.message;
}
}  // namespace

#define EXPECT_GRAD(...) EXPECT_TRUE(check(__VA_ARGS__))

static void unary_checks() {
  EXPECT_GRAD([](const VV& v) { return neg(v[0]); }, {R({3, 4}, 1)});
  EXPECT_GRAD([](const VV& v) { return -v[0]; }, {R({3, 4}, 1)});
  EXPECT_GRAD([](const VV& v) { return exp(v[0]); }, {R({3, 4}, 2)});
  EXPECT_GRAD([](const VV& v) { return log(v[0]); }, {R({3, 4}, 3, 0.2, 3)});
  EXPECT_GRAD([](const VV& v) { return sqrt(v[0]); }, {R({3, 4}, 4, 0.2, 3)});
  EXPECT_GRAD([](const VV& v) { return abs(v[0]); }, {Rdistinct({3, 4}, 5)});
  EXPECT_GRAD([](const VV& v) { return square(v[0]); }, {R({3, 4}, 6)});
  EXPECT_GRAD([](const VV& v) { return pow(v[0], 2.5); }, {R({3, 4}, 7, 0.2, 3)});
  EXPECT_GRAD([](const VV& v) { return pow(v[0], -1.5); }, {R({3, 4}, 7, 0.2, 3)});
  EXPECT_GRAD([](const VV& v) { return clamp(v[0], -0.5, 0.7); }, {R({5, 6}, 8)});
  EXPECT_GRAD([](const VV& v) { return sigmoid(v[0]); }, {R({3, 4}, 9, -6, 6)});
  EXPECT_GRAD([](const VV& v) { return tanh(v[0]); }, {R({3, 4}, 10)});
}

static void binary_checks() {
  const std::pair<Shape, Shape> shapes[] = {{{3, 4}, {3, 4}}, {{3, 1, 4}, {2, 1}}, {{4}, {2, 3, 4}},
                                            {{2, 3}, {}}, {{1, 3}, {2, 1}}};
  for (auto& [sa, sb] : shapes) {
    Tensor a = R(sa, 11), b = R(sb, 12, 0.5, 2);
    EXPECT_GRAD([](const VV& v) { return v[0] + v[1]; }, {a, b});
    EXPECT_GRAD([](const VV& v) { return v[0] - v[1]; }, {a, b});
    EXPECT_GRAD([](const VV& v) { return v[0] * v[1]; }, {a, b});
    EXPECT_GRAD([](const VV& v) { return v[0] / v[1]; }, {a, b});
    Tensor da = Rdistinct(sa, 13), db = Rdistinct(sb, 14);
    EXPECT_GRAD([](const VV& v) { return maximum(v[0], v[1]); }, {da, db});
    EXPECT_GRAD([](const VV& v) { return minimum(v[0], v[1]); }, {da, db});
  }
  Tensor x = R({4, 5}, 15, 0.5, 2);
  EXPECT_GRAD([](const VV& v) { return v[0] + 1.5; }, {x});
  EXPECT_GRAD([](const VV& v) { return v[0] - 1.5; }, {x});
  EXPECT_GRAD([](const VV& v) { return v[0] * 1.5; }, {x});
  EXPECT_GRAD([](const VV& v) { return v[0] / 1.5; }, {x});
  EXPECT_GRAD([](const VV& v) { return 1.5 + v[0]; }, {x});
  EXPECT_GRAD([](const VV& v) { return 1.5 - v[0]; }, {x});
  EXPECT_GRAD([](const VV& v) { return 1.5 * v[0]; }, {x});
  EXPECT_GRAD([](const VV& v) { return 1.5 / v[0]; }, {x});
  EXPECT_GRAD([](const VV& v) { return maximum(v[0], 1.1); }, {x});
  EXPECT_GRAD([](const VV& v) { return minimum(v[0], 1.1); }, {x});
  EXPECT_GRAD([](const VV& v) { return maximum(1.1, v[0]); }, {x});
  EXPECT_GRAD([](const VV& v) { return minimum(1.1, v[0]); }, {x});
}

static void reduce_checks() {
  Tensor x = R({3, 4, 5}, 20);
  EXPECT_GRAD([](const VV& v) { return sum(v[0]); }, {x});
  EXPECT_GRAD([](const VV& v) { return sum(v[0], {1}); }, {x});
  EXPECT_GRAD([](const VV& v) { return sum(v[0], {0, 2}, true); }, {x});
  EXPECT_GRAD([](const VV& v) { return sum(v[0], {-1}, true); }, {x});
  EXPECT_GRAD([](const VV& v) { return mean(v[0]); }, {x});
  EXPECT_GRAD([](const VV& v) { return mean(v[0], {2}); }, {x});
  EXPECT_GRAD([](const VV& v) { return mean(v[0], {0, 1}, true); }, {x});
  EXPECT_GRAD([](const VV& v) { return var(v[0]); }, {x});
  EXPECT_GRAD([](const VV& v) { return var(v[0], {1}, true, false); }, {x});
  EXPECT_GRAD([](const VV& v) { return var(v[0], {0, 2}, false, true); }, {x});
  Tensor d = Rdistinct({3, 4, 5}, 21);
  EXPECT_GRAD([](const VV& v) { return max(v[0], 1); }, {d});
  EXPECT_GRAD([](const VV& v) { return max(v[0], 2, true); }, {d});
  EXPECT_GRAD([](const VV& v) { return min(v[0], 0); }, {d});
  EXPECT_GRAD([](const VV& v) { return min(v[0], -1, true); }, {d});
  EXPECT_GRAD([](const VV& v) { return max(v[0]); }, {d});
  EXPECT_GRAD([](const VV& v) { return min(v[0]); }, {d});
  // odd sizes and a non-contiguous input
  EXPECT_GRAD([](const VV& v) { return sum(transpose(v[0], 0, 1), {0}); }, {R({7, 1}, 22)});
  EXPECT_GRAD([](const VV& v) { return mean(transpose(v[0], 0, 2), {1}); }, {x});
}

static void index_checks() {
  Tensor x = R({4, 5, 3}, 30);
  Tensor idx = Tensor::from_vector<int64_t>({4, 0, 4, 2}, {4}, g_dev);
  EXPECT_GRAD([idx](const VV& v) { return index_select(v[0], 1, idx); }, {x});
  Tensor idx0 = Tensor::from_vector<int32_t>({3, 0, 3}, {3}, g_dev);
  EXPECT_GRAD([idx0](const VV& v) { return index_select(v[0], 0, idx0); }, {x});
  Tensor gi = Tensor::from_vector<int64_t>({0, 4, 4, 1, 2, 3, 0, 0, 1, 2, 2, 2}, {4, 3, 1}, g_dev);
  EXPECT_GRAD([gi](const VV& v) { return gather(v[0], 1, gi); }, {x});
  Tensor src = R({4, 3, 2}, 31);
  EXPECT_GRAD([gi](const VV& v) { return scatter_add(v[0], 1, gi, v[1]); }, {x, src});
  Tensor cond = Tensor::from_vector<uint8_t>({1, 0, 0, 1, 1}, {5, 1}, g_dev);
  EXPECT_GRAD([cond](const VV& v) { return where(cond, v[0], v[1]); }, {R({5, 3}, 32), R({3}, 33)});
  Tensor mask = Tensor::from_vector<uint8_t>({0, 1, 1}, {3}, g_dev);
  EXPECT_GRAD([mask](const VV& v) { return masked_select(v[0], mask); }, {R({4, 3}, 34)});
  EXPECT_GRAD([mask](const VV& v) { return masked_select(v[0], mask.view({3, 1})); }, {R({4}, 35)});
}

static void join_and_view_checks() {
  Tensor a = R({2, 3, 4}, 40), b = R({2, 2, 4}, 41);
  EXPECT_GRAD([](const VV& v) { return concat({v[0], v[1], v[0]}, 1); }, {a, b});
  EXPECT_GRAD([](const VV& v) { return split(v[0], {1, 2}, 1)[1] * 2.0; }, {a});
  EXPECT_GRAD([](const VV& v) {
    auto p = split(v[0], {3, 1}, -1);
    return sum(p[0], {2}) * sum(p[1], {2});
  }, {a});
  EXPECT_GRAD([](const VV& v) { return stack({v[0], v[1]}, 3); }, {a, R({2, 3, 4}, 42)});
  EXPECT_GRAD([](const VV& v) { return stack({v[0], v[1]}, 0); }, {a, R({2, 3, 4}, 43)});
  EXPECT_GRAD([](const VV& v) { return reshape(v[0], {4, 6}); }, {a});
  EXPECT_GRAD([](const VV& v) { return view(v[0], {6, -1}); }, {a});
  EXPECT_GRAD([](const VV& v) { return reshape(transpose(v[0], 0, 2), {-1}); }, {a});
  EXPECT_GRAD([](const VV& v) { return permute(v[0], {2, 0, 1}) * permute(v[0], {2, 0, 1}); }, {a});
  EXPECT_GRAD([](const VV& v) { return narrow(v[0], 2, 1, 2); }, {a});
  EXPECT_GRAD([](const VV& v) { return slice(v[0], 2, 0, 4, 2); }, {a});
  EXPECT_GRAD([](const VV& v) { return select(v[0], 1, 2); }, {a});
  EXPECT_GRAD([](const VV& v) { return squeeze(unsqueeze(v[0], 1), 1) * unsqueeze(v[0], 0); }, {a});
  EXPECT_GRAD([](const VV& v) { return expand(v[0], {2, 3, 4}); }, {R({3, 1}, 44)});
  EXPECT_GRAD([](const VV& v) { return flatten(v[0], 1); }, {a});
  EXPECT_GRAD([](const VV& v) { return contiguous(transpose(v[0], 1, 2)); }, {a});
}

TEST(OpsGrad, Unary) { unary_checks(); }
TEST(OpsGrad, BinaryBroadcastAndScalar) { binary_checks(); }
TEST(OpsGrad, Reductions) { reduce_checks(); }
TEST(OpsGrad, Indexing) { index_checks(); }
TEST(OpsGrad, JoinAndViews) { join_and_view_checks(); }

TEST(OpsGrad, CompositeLossWithReuse) {
  // A triplet-style composite, with x used in three places.
  EXPECT_GRAD([](const VV& v) {
    Variable dp = sum(square(v[0] - v[1]), {1});
    Variable dn = sum(square(v[0] - v[2]), {1});
    return mean(clamp(dp - dn + 0.5, 0.0, 1e30)) + var(v[0]) * 0.1;
  }, {R({6, 4}, 50), R({6, 4}, 51), R({6, 4}, 52)});
}

TEST(OpsGrad, VariableUsedTwiceGetsBothContributions) {
  Tensor xt = Tensor::from_vector<double>({1.0, -2.0, 3.0}, {3});
  Variable x(xt, true);
  Variable y = sum(x * x + x * 3.0);  // dy/dx = 2x + 3
  y.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5.0, -1.0, 9.0}));
  Variable z = sum(x);
  z.backward();  // accumulates
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6.0, 0.0, 10.0}));
}

TEST(OpsGrad, ArgmaxIsPlainTensorAndErrorsThrow) {
  Variable x(Tensor::from_vector<double>({1, 5, 5, 2}, {2, 2}), true);
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmin(x, 0).dtype(), DType::I64);
  Variable y(Tensor::zeros({3, 4}, DType::F64), true);
  try {
    add(x, y);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(3, 4)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mul(x, Variable(Tensor::zeros({2, 2}, DType::F32))), Error);
  EXPECT_THROW(sum(x, {2}), Error);
  EXPECT_THROW(split(x, {1, 2}, 0), Error);
}

TEST(OpsGradCuda, AllOpsOnDevice) {
  MN_SKIP_IF_NO_CUDA();
  g_dev = Device::cuda();
  unary_checks();
  binary_checks();
  reduce_checks();
  index_checks();
  join_and_view_checks();
  g_dev = Device::cpu();
}
