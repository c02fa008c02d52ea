// Elementwise kernels (kernels/elementwise.h): forward values and backward
// formulas against std:: loops written here, broadcasting and non-contiguous
// inputs against explicit index arithmetic, error paths, sum_to_shape, and
// CPU-vs-CUDA parity (skipped without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "kernels/elementwise.h"
#include "kernels/reduce.h"
#include "tests/common/test_util.h"

using namespace mn;
namespace K = mn::kernels;
using K::BinaryOp;
using K::UnaryOp;

namespace {
const UnaryOp kUnary[] = {UnaryOp::Neg, UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sqrt, UnaryOp::Abs,
                          UnaryOp::Square, UnaryOp::Pow, UnaryOp::Clamp, UnaryOp::Sigmoid, UnaryOp::Tanh};
const BinaryOp kBinary[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div,
                            BinaryOp::Maximum, BinaryOp::Minimum};

// Parameters used for pow (exponent 2.5) and clamp ([-0.3, 0.4]).
double p0_of(UnaryOp op) { return op == UnaryOp::Pow ? 2.5 : op == UnaryOp::Clamp ? -0.3 : 0; }
double p1_of(UnaryOp op) { return op == UnaryOp::Clamp ? 0.4 : 0; }
bool positive_domain(UnaryOp op) { return op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Pow; }

double ref_unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Abs: return std::fabs(x);
    case UnaryOp::Square: return x * x;
    case UnaryOp::Pow: return std::pow(x, 2.5);
    case UnaryOp::Clamp: return std::min(std::max(x, -0.3), 0.4);
    case UnaryOp::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case UnaryOp::Tanh: return std::tanh(x);
  }
  return 0;
}
// Textbook derivative f'(x).
double ref_deriv(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Neg: return -1;
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Log: return 1 / x;
    case UnaryOp::Sqrt: return 0.5 / std::sqrt(x);
    case UnaryOp::Abs: return x > 0 ? 1 : (x < 0 ? -1 : 0);
    case UnaryOp::Square: return 2 * x;
    case UnaryOp::Pow: return 2.5 * std::pow(x, 1.5);
    case UnaryOp::Clamp: return (x >= -0.3 && x <= 0.4) ? 1 : 0;
    case UnaryOp::Sigmoid: { double s = 1 / (1 + std::exp(-x)); return s * (1 - s); }
    case UnaryOp::Tanh: { double t = std::tanh(x); return 1 - t * t; }
  }
  return 0;
}
double ref_binary(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Maximum: return std::max(a, b);
    case BinaryOp::Minimum: return std::min(a, b);
  }
  return 0;
}

Tensor input_for(UnaryOp op, const Shape& s, DType dt, uint64_t seed) {
  return positive_domain(op) ? test::rand(s, 0.1, 3.0, dt, Device::cpu(), seed)
                             : test::rand(s, -3.0, 3.0, dt, Device::cpu(), seed);
}

// Reference of a (op) b under NumPy broadcasting, by explicit index arithmetic.
std::vector<double> ref_broadcast(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& out) {
  auto av = a.contiguous().to_double_vector(), bv = b.contiguous().to_double_vector();
  const int nd = static_cast<int>(out.size());
  auto offset = [&](const Shape& s, const std::vector<int64_t>& c) {
    int64_t off = 0;
    const int lead = nd - static_cast<int>(s.size());
    for (int d = lead; d < nd; ++d) off = off * s[d - lead] + (s[d - lead] == 1 ? 0 : c[d]);
    return off;
  };
  std::vector<double> r(numel_of(out));
  std::vector<int64_t> c(nd, 0);
  for (int64_t l = 0; l < numel_of(out); ++l) {
    int64_t rem = l;
    for (int d = nd - 1; d >= 0; --d) { c[d] = rem % out[d]; rem /= out[d]; }
    r[l] = ref_binary(op, av[offset(a.shape(), c)], bv[offset(b.shape(), c)]);
  }
  return r;
}
}  // namespace

// Tolerances: float64 results are compared at 1e-12 relative (a few ulps of
// libm differences); float32 at 2e-6 relative, ~16 ulps, because the float
// kernels use expf/logf/powf while the reference runs in double.
TEST(Elementwise, UnaryForwardMatchesStdLoops) {
  for (DType dt : {DType::F64, DType::F32}) {
    const double rtol = dt == DType::F64 ? 1e-12 : 2e-6;
    for (UnaryOp op : kUnary) {
      Tensor x = input_for(op, {7, 13}, dt, 3);
      Tensor y = K::unary(op, x, p0_of(op), p1_of(op));
      auto xv = x.to_double_vector();
      std::vector<double> ref(xv.size());
      for (size_t i = 0; i < xv.size(); ++i) ref[i] = ref_unary(op, xv[i]);
      EXPECT_TRUE(test::all_close(ref, y.to_double_vector(), 1e-7 * (dt == DType::F32), rtol))
          << K::unary_name(op) << " " << dtype_name(dt);
    }
  }
}

TEST(Elementwise, UnaryBackwardMatchesDerivatives) {
  for (UnaryOp op : kUnary) {
    Tensor x = input_for(op, {5, 11}, DType::F64, 4);
    Tensor g = test::randn({5, 11}, DType::F64, Device::cpu(), 5);
    Tensor y = K::unary(op, x, p0_of(op), p1_of(op));
    Tensor gx = K::unary_backward(op, g, x, y, p0_of(op), p1_of(op));
    auto xv = x.to_double_vector(), gv = g.to_double_vector();
    std::vector<double> ref(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) ref[i] = gv[i] * ref_deriv(op, xv[i]);
    EXPECT_TRUE(test::all_close(ref, gx.to_double_vector(), 1e-14, 1e-12)) << K::unary_name(op);
  }
}

TEST(Elementwise, SigmoidIsStableForLargeInputs) {
  Tensor x = Tensor::from_vector<double>({-800, -40, 0, 40, 800}, {5});
  auto y = K::sigmoid(x).to_vector<double>();
  for (double v : y) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[2], 0.5);
  EXPECT_EQ(y[4], 1.0);
}

TEST(Elementwise, BinarySameShapeAndBroadcast) {
  struct Case { Shape a, b; };
  const Case cases[] = {{{4, 5}, {4, 5}}, {{3, 1, 4}, {2, 1}}, {{6}, {2, 3, 6}}, {{2, 3}, {}},
                        {{1}, {5, 1}}, {{1000003}, {1000003}}};
  for (DType dt : {DType::F64, DType::F32}) {
    for (const Case& c : cases) {
      Tensor a = test::rand(c.a, -2, 2, dt, Device::cpu(), 7);
      Tensor b = test::rand(c.b, 0.5, 2, dt, Device::cpu(), 8);  // away from 0 for div
      Shape out = broadcast_shapes(c.a, c.b, "test");
      for (BinaryOp op : kBinary) {
        Tensor r = K::binary(op, a, b);
        ASSERT_EQ(r.shape(), out);
        // Exactly rounded ops: float32 agrees with the double reference to 1 ulp.
        EXPECT_TRUE(test::all_close(ref_broadcast(op, a, b, out), r.to_double_vector(), 0,
                                    dt == DType::F64 ? 1e-15 : 1.2e-7))
            << K::binary_name(op) << " " << shape_str(c.a) << " " << shape_str(c.b);
      }
    }
  }
}

TEST(Elementwise, BinaryNonContiguousInputs) {
  Tensor a = test::rand({5, 7}, -2, 2, DType::F64, Device::cpu(), 11).t();   // (7, 5) strided
  Tensor b = test::rand({5, 7, 3}, 0.5, 2, DType::F64, Device::cpu(), 12).select(2, 1).t();
  for (BinaryOp op : kBinary) {
    Tensor r = K::binary(op, a, b);
    EXPECT_TRUE(test::all_close(ref_broadcast(op, a, b, {7, 5}), r.to_double_vector(), 0, 1e-15));
  }
  Tensor u = K::exp(a);
  EXPECT_TRUE(test::all_close(K::exp(a.contiguous()), u, 0, 0));
}

TEST(Elementwise, BinaryBackwardFormulas) {
  Tensor a = test::rand({3, 4}, 0.5, 2, DType::F64, Device::cpu(), 1);
  Tensor b = test::rand({3, 4}, 0.5, 2, DType::F64, Device::cpu(), 2);
  Tensor g = test::randn({3, 4}, DType::F64, Device::cpu(), 3);
  auto av = a.to_double_vector(), bv = b.to_double_vector(), gv = g.to_double_vector();
  for (BinaryOp op : kBinary) {
    auto [ga, gb] = K::binary_backward(op, g, a, b);
    std::vector<double> ra(av.size()), rb(av.size());
    for (size_t i = 0; i < av.size(); ++i) {
      double x = av[i], y = bv[i], G = gv[i];
      switch (op) {
        case BinaryOp::Add: ra[i] = G; rb[i] = G; break;
        case BinaryOp::Sub: ra[i] = G; rb[i] = -G; break;
        case BinaryOp::Mul: ra[i] = G * y; rb[i] = G * x; break;
        case BinaryOp::Div: ra[i] = G / y; rb[i] = -G * x / (y * y); break;
        case BinaryOp::Maximum: ra[i] = x > y ? G : 0; rb[i] = x > y ? 0 : G; break;
        case BinaryOp::Minimum: ra[i] = x < y ? G : 0; rb[i] = x < y ? 0 : G; break;
      }
    }
    EXPECT_TRUE(test::all_close(ra, ga.to_double_vector(), 0, 1e-15)) << K::binary_name(op);
    EXPECT_TRUE(test::all_close(rb, gb.to_double_vector(), 0, 1e-15)) << K::binary_name(op);
  }
  // Ties split the gradient half/half.
  auto [ta, tb] = K::binary_backward(BinaryOp::Maximum, Tensor::ones({2}, DType::F64), a.select(0, 0).narrow(0, 0, 2),
                                     a.select(0, 0).narrow(0, 0, 2));
  EXPECT_EQ(ta.to_vector<double>(), (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(tb.to_vector<double>(), (std::vector<double>{0.5, 0.5}));
}

TEST(Elementwise, ScalarForms) {
  Tensor x = test::rand({9}, 0.5, 2, DType::F64, Device::cpu(), 21);
  auto xv = x.to_double_vector();
  const double s = 1.25;
  for (BinaryOp op : kBinary)
    for (bool left : {false, true}) {
      auto r = K::binary_scalar(op, x, s, left).to_double_vector();
      for (size_t i = 0; i < xv.size(); ++i)
        EXPECT_DOUBLE_EQ(r[i], left ? ref_binary(op, s, xv[i]) : ref_binary(op, xv[i], s))
            << K::binary_name(op) << " left=" << left;
    }
}

TEST(Elementwise, SumToShapeUndoesBroadcast) {
  Tensor g = test::randn({2, 3, 4}, DType::F64, Device::cpu(), 5);
  auto gv = g.to_double_vector();
  Tensor r = K::sum_to_shape(g, {3, 1});
  ASSERT_EQ(r.shape(), (Shape{3, 1}));
  std::vector<double> ref(3, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) ref[j] += gv[(i * 3 + j) * 4 + k];
  EXPECT_TRUE(test::all_close(ref, r.to_double_vector(), 1e-14, 1e-14));
  EXPECT_TRUE(K::sum_to_shape(g, {2, 3, 4}).shares_storage(g));
  EXPECT_THROW(K::sum_to_shape(g, {5}), Error);
}

TEST(Elementwise, ErrorsNameTheOpAndShapes) {
  Tensor a = Tensor::zeros({3, 4}), b = Tensor::zeros({2, 4});
  try {
    K::add(a, b);
    FAIL() << "expected mn::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos) << m;
    EXPECT_NE(m.find("(3, 4)"), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 4)"), std::string::npos) << m;
  }
  try {
    K::mul(Tensor::zeros({3}, DType::F32), Tensor::zeros({3}, DType::F64));
    FAIL() << "expected mn::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("float32"), std::string::npos) << m;
    EXPECT_NE(m.find("(3,)"), std::string::npos) << m;
  }
  EXPECT_THROW(K::exp(Tensor::zeros({3}, DType::I64)), Error);
}

TEST(Elementwise, DeviceMismatchThrows) {
  MN_SKIP_IF_NO_CUDA();
  Tensor a = Tensor::zeros({3}), b = Tensor::zeros({3}, DType::F32, Device::cuda());
  EXPECT_THROW(K::add(a, b), Error);
}

// Parity: fresh random inputs, CPU result as the oracle. The issue sets a relative
// error of 1e-5; atol 1e-6 covers results that cancel to ~0 (sub, tanh near 0).
TEST(ElementwiseCuda, UnaryParity) {
  MN_SKIP_IF_NO_CUDA();
  for (DType dt : {DType::F32, DType::F64})
    for (UnaryOp op : kUnary) {
      Tensor x = input_for(op, {1000003}, dt, 31);
      Tensor g = test::randn({1000003}, dt, Device::cpu(), 32);
      Tensor y = K::unary(op, x, p0_of(op), p1_of(op));
      Tensor yc = K::unary(op, x.cuda(), p0_of(op), p1_of(op));
      EXPECT_TRUE(test::all_close(y, yc, 1e-6, 1e-5)) << K::unary_name(op);
      Tensor gx = K::unary_backward(op, g, x, y, p0_of(op), p1_of(op));
      Tensor gxc = K::unary_backward(op, g.cuda(), x.cuda(), yc, p0_of(op), p1_of(op));
      EXPECT_TRUE(test::all_close(gx, gxc, 1e-6, 1e-5)) << K::unary_name(op) << " backward";
    }
}

TEST(ElementwiseCuda, BinaryParity) {
  MN_SKIP_IF_NO_CUDA();
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor a = test::rand({64, 1, 33}, -2, 2, dt, Device::cpu(), 41);
    Tensor b = test::rand({17, 33}, 0.5, 2, dt, Device::cpu(), 42);
    Tensor c = test::rand({64, 17, 33}, -2, 2, dt, Device::cpu(), 43);
    Tensor g = test::randn({64, 17, 33}, dt, Device::cpu(), 44);
    for (BinaryOp op : kBinary) {
      EXPECT_TRUE(test::all_close(K::binary(op, a, b), K::binary(op, a.cuda(), b.cuda()), 1e-6, 1e-5));
      EXPECT_TRUE(test::all_close(K::binary(op, c, g), K::binary(op, c.cuda(), g.cuda()), 1e-6, 1e-5));
      auto [ga, gb] = K::binary_backward(op, g, a, b);
      auto [gac, gbc] = K::binary_backward(op, g.cuda(), a.cuda(), b.cuda());
      EXPECT_TRUE(test::all_close(ga, gac, 1e-6, 1e-5)) << K::binary_name(op);
      EXPECT_TRUE(test::all_close(gb, gbc, 1e-6, 1e-5)) << K::binary_name(op);
      for (bool left : {false, true})
        EXPECT_TRUE(test::all_close(K::binary_scalar(op, b, 0.75, left),
                                    K::binary_scalar(op, b.cuda(), 0.75, left), 1e-6, 1e-5));
    }
    Tensor st = c.transpose(0, 2);  // non-contiguous on both devices
    EXPECT_TRUE(test::all_close(K::mul(st, st), K::mul(st.cuda(), c.cuda().transpose(0, 2)), 1e-6, 1e-5));
  }
}
