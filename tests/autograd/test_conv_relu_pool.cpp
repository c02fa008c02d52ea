// ag::conv2d_relu_max_pool2d (autograd/ops_conv.h), Koch's conv -> ReLU -> max-pool as one
// node, against the composition it replaces (conv2d with the fused ReLU, then
// max_pool2d): values and every gradient bit for bit on the CPU (float and double) and on
// a GPU (the same convolution kernels on both sides); a float64 gradcheck. (nn::Conv2d's
// entry point: tests/nn/test_layers_conv.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops_conv.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

using ag::Variable;

kernels::Pool2dParams pool(int64_t k, int64_t s, int64_t pad = 0) {
  kernels::Pool2dParams p;
  p.kernel_h = p.kernel_w = k, p.stride_h = p.stride_w = s, p.pad_h = p.pad_w = pad;
  return p;
}

::testing::AssertionResult same_bits(const Tensor& ref, const Tensor& x) {
  if (ref.shape() != x.shape()) return ::testing::AssertionFailure() << "shapes differ";
  const auto a = ref.to_double_vector(), b = x.to_double_vector();  // exact for float and double
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  return ::testing::AssertionSuccess();
}

struct Run {
  Tensor y, gx, gw, gb;
};

// y = op(x, w, b) and the gradients of sum(y * dy); the inputs' requires_grad as given.
Run run(bool fused, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy,
        const kernels::Conv2dParams& cp, const kernels::Pool2dParams& pp, bool grad_x) {
  Variable vx(x, grad_x), vw(w, true), vb = b.defined() ? Variable(b, true) : Variable();
  Variable y;
  if (fused) {
    y = ag::conv2d_relu_max_pool2d(vx, vw, vb, cp, pp);
  } else {
    kernels::Conv2dParams c = cp;
    c.relu = true;
    y = ag::max_pool2d(ag::conv2d(vx, vw, vb, c), pp);
  }
  y.backward(dy);
  return {y.data(), grad_x ? vx.grad() : Tensor(), vw.grad(), vb.defined() ? vb.grad() : Tensor()};
}

// Conv outputs around 0 (biases shifted negative) so the ReLU zeroes whole windows.
void fused_matches_composition(DType dt, Device dev) {
  struct Cfg {
    Shape x, w;
    int64_t stride, pad;
    kernels::Pool2dParams p;
    bool bias, grad_x;
  };
  const std::vector<Cfg> cfgs = {
      {{2, 3, 12, 12}, {4, 3, 3, 3}, 1, 0, pool(2, 2), true, true},     // Koch's shape of layer
      {{2, 2, 11, 9}, {3, 2, 2, 2}, 1, 1, pool(2, 2), false, true},     // odd sizes, no bias
      {{1, 2, 13, 13}, {3, 2, 3, 3}, 2, 1, pool(3, 2, 1), true, false}, // overlapping windows
  };
  uint64_t seed = 40;
  for (const Cfg& c : cfgs) {
    kernels::Conv2dParams cp;
    cp.stride_h = cp.stride_w = c.stride, cp.pad_h = cp.pad_w = c.pad;
    const Tensor x = test::rand(c.x, -1, 1, dt, dev, ++seed), w = test::rand(c.w, -1, 1, dt, dev, ++seed);
    const Tensor b = c.bias ? test::rand({c.w[0]}, -1.5, 0.5, dt, dev, ++seed) : Tensor();
    const Shape ys = ag::conv2d_relu_max_pool2d(Variable(x), Variable(w), Variable(), cp, c.p).shape();
    const Tensor dy = test::rand(ys, -1, 1, dt, dev, ++seed);
    const Run u = run(false, x, w, b, dy, cp, c.p, c.grad_x), f = run(true, x, w, b, dy, cp, c.p, c.grad_x);
    SCOPED_TRACE("input " + shape_str(c.x) + " weight " + shape_str(c.w));
    EXPECT_TRUE(same_bits(u.y, f.y));
    if (c.grad_x) {
      EXPECT_TRUE(same_bits(u.gx, f.gx));
    }
    EXPECT_TRUE(same_bits(u.gw, f.gw));
    if (c.bias) {
      EXPECT_TRUE(same_bits(u.gb, f.gb));
    }
    // The ReLU zeroed some windows entirely (their gradient is masked), not all.
    const auto yv = f.y.to_double_vector();
    const auto zeros = std::count(yv.begin(), yv.end(), 0.0);
    EXPECT_GT(zeros, 0);
    EXPECT_LT(zeros, static_cast<std::ptrdiff_t>(yv.size()));
  }
}

TEST(ConvReluPool, MatchesTheCompositionBitForBit) {
  fused_matches_composition(DType::F32, Device::cpu());
  fused_matches_composition(DType::F64, Device::cpu());
}

TEST(ConvReluPool, GradcheckFloat64) {
  for (const kernels::Pool2dParams& p : {pool(2, 2), pool(3, 2, 1)}) {
    auto f = [p](const std::vector<Variable>& v) { return ag::conv2d_relu_max_pool2d(v[0], v[1], v[2], {}, p); };
    ag::GradcheckOptions o;
    o.eps = 1e-6;  // kinks (ReLU at 0, argmax flips) are detected and skipped by the checker
    ag::GradcheckResult r = ag::gradcheck(f,
                                          {test::rand({2, 2, 9, 9}, -1, 1, DType::F64, Device::cpu(), 7),
                                           test::rand({3, 2, 2, 2}, -1, 1, DType::F64, Device::cpu(), 8),
                                           test::rand({3}, -0.5, 0.5, DType::F64, Device::cpu(), 9)},
                                          o);
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_GT(r.checked, 100);
  }
}

TEST(ConvReluPoolCuda, MatchesTheCompositionBitForBit) {
  MN_SKIP_IF_NO_CUDA();
  fused_matches_composition(DType::F32, Device::cuda());
  fused_matches_composition(DType::F64, Device::cuda());
}

}  // namespace
}  // namespace mn
