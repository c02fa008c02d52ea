// The tape itself, with tiny ops defined here (so these tests depend on no
// kernel but the accumulator): accumulation, reuse of a Variable, release of
// saved tensors, retain_graph, no_grad, and the gradient checker catching a
// wrong backward.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "tests/common/test_util.h"

using namespace mn;
using ag::Variable;

namespace {

std::vector<double> host(const Tensor& t) { return t.to_double_vector(); }
Tensor dev(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector(v, s); }

// y = x * x (elementwise), float64 CPU only; `bug` scales the gradient wrongly.
Variable square(const Variable& x, double bug = 1.0) {
  auto xv = host(x.data());
  std::vector<double> y(xv.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = xv[i] * xv[i];
  Tensor saved = x.data();
  return ag::make_variable(dev(y, x.shape()), {x}, [saved, bug](const Tensor& g) {
    auto gv = host(g), s = host(saved);
    std::vector<double> r(gv.size());
    for (size_t i = 0; i < r.size(); ++i) r[i] = 2 * s[i] * gv[i] * bug;
    return std::vector<Tensor>{dev(r, saved.shape())};
  }, "square");
}

// y = a * b (elementwise).
Variable mul(const Variable& a, const Variable& b) {
  auto av = host(a.data()), bv = host(b.data());
  std::vector<double> y(av.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = av[i] * bv[i];
  Tensor sa = a.data(), sb = b.data();
  return ag::make_variable(dev(y, a.shape()), {a, b}, [sa, sb](const Tensor& g) {
    auto gv = host(g), x = host(sa), z = host(sb);
    std::vector<double> ga(gv.size()), gb(gv.size());
    for (size_t i = 0; i < gv.size(); ++i) {
      ga[i] = gv[i] * z[i];
      gb[i] = gv[i] * x[i];
    }
    return std::vector<Tensor>{dev(ga, sa.shape()), dev(gb, sb.shape())};
  }, "mul");
}

// Sum of all elements -> shape {1}.
Variable sum(const Variable& x) {
  double s = 0;
  for (double v : host(x.data())) s += v;
  Shape shape = x.shape();
  return ag::make_variable(dev({s}, {1}), {x}, [shape](const Tensor& g) {
    return std::vector<Tensor>{Tensor::full(shape, g.item(), DType::F64)};
  }, "sum");
}

// max(x, 0), to exercise kink skipping.
Variable relu(const Variable& x) {
  auto xv = host(x.data());
  std::vector<double> y(xv.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = xv[i] > 0 ? xv[i] : 0;
  Tensor saved = x.data();
  return ag::make_variable(dev(y, x.shape()), {x}, [saved](const Tensor& g) {
    auto gv = host(g), s = host(saved);
    for (size_t i = 0; i < gv.size(); ++i) gv[i] = s[i] > 0 ? gv[i] : 0;
    return std::vector<Tensor>{dev(gv, saved.shape())};
  }, "relu");
}

}  // namespace

TEST(Tape, ChainRuleAndLeafGradients) {
  Variable x(dev({1, 2, 3}, {3}), true);
  Variable y(dev({4, 5, 6}, {3}), true);
  Variable loss = sum(mul(square(x), y));  // sum(x^2 y)
  loss.backward();
  EXPECT_EQ(host(x.grad()), (std::vector<double>{8, 20, 36}));  // 2 x y
  EXPECT_EQ(host(y.grad()), (std::vector<double>{1, 4, 9}));    // x^2
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(loss.is_leaf());
}

TEST(Tape, VariableUsedTwiceGetsBothContributions) {
  Variable x(dev({1.5, -2}, {2}), true);
  Variable loss = sum(mul(x, x));  // d/dx = 2x through two edges
  loss.backward();
  EXPECT_EQ(host(x.grad()), (std::vector<double>{3, -4}));
  // Diamond: z = x*x feeds two branches.
  Variable x2(dev({3}, {1}), true);
  Variable z = square(x2);
  Variable l2 = sum(mul(z, z));  // x^4 -> 4x^3 = 108
  l2.backward();
  EXPECT_DOUBLE_EQ(host(x2.grad())[0], 108.0);
}

TEST(Tape, GradientsAccumulateUntilZeroed) {
  Variable x(dev({2}, {1}), true);
  sum(square(x)).backward();
  sum(square(x)).backward();
  EXPECT_DOUBLE_EQ(host(x.grad())[0], 8.0);
  x.zero_grad();
  EXPECT_DOUBLE_EQ(host(x.grad())[0], 0.0);
  sum(square(x)).backward();
  EXPECT_DOUBLE_EQ(host(x.grad())[0], 4.0);
}

TEST(Tape, SavedTensorsReleasedUnlessRetained) {
  Variable x(dev({1, 2}, {2}), true);
  Tensor big = Tensor::zeros({1000}, DType::F64);
  auto node_holding = [&](const Variable& in) {
    return ag::make_variable(in.data().clone(), {in}, [big](const Tensor& g) {
      (void)big;
      return std::vector<Tensor>{g};
    }, "holder");
  };
  Variable h = node_holding(x);
  EXPECT_EQ(big.storage().use_count(), 2);  // the closure saved it
  Variable loss = sum(h);
  loss.backward();
  EXPECT_EQ(big.storage().use_count(), 1);  // released after backward
  EXPECT_THROW(loss.backward(), Error);     // graph already released

  Variable h2 = node_holding(x);
  Variable l2 = sum(h2);
  l2.backward(/*retain_graph=*/true);
  EXPECT_EQ(big.storage().use_count(), 2);
  EXPECT_NO_THROW(l2.backward());
}

TEST(Tape, NoGradRecordsNothing) {
  Variable x(dev({1}, {1}), true);
  Tensor big = Tensor::zeros({10}, DType::F64);
  {
    ag::NoGradGuard g;
    EXPECT_FALSE(ag::grad_mode_enabled());
    Variable y = square(x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
  }
  EXPECT_TRUE(ag::grad_mode_enabled());
  Variable c(dev({1}, {1}), false);
  EXPECT_FALSE(square(c).requires_grad());  // no input needs grad: nothing recorded
}

TEST(Tape, ErrorsAreClear) {
  Variable c(dev({1, 2}, {2}), false);
  EXPECT_THROW(c.backward(), Error);  // does not require grad
  Variable x(dev({1, 2}, {2}), true);
  EXPECT_THROW(square(x).backward(), Error);  // non-scalar without grad_output
  EXPECT_THROW(square(x).backward(Tensor::ones({3}, DType::F64)), Error);
  Variable xi(Tensor::zeros({2}, DType::I32), false);
  EXPECT_THROW(xi.set_requires_grad(true), Error);  // integer tensors cannot require grad
}

TEST(Gradcheck, PassesOnCorrectBackward) {
  Tensor x = test::rand({4, 3}, -2, 2, DType::F64, Device::cpu(), 7);
  Tensor y = test::rand({4, 3}, -2, 2, DType::F64, Device::cpu(), 8);
  auto r = ag::gradcheck([](const std::vector<Variable>& v) { return mul(square(v[0]), v[1]); }, {x, y});
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.checked, 24);
  EXPECT_LT(r.max_error, 1e-7);
}

TEST(Gradcheck, CatchesAWrongBackward) {
  Tensor x = test::rand({5}, -2, 2, DType::F64, Device::cpu(), 9);
  auto r = ag::gradcheck([](const std::vector<Variable>& v) { return square(v[0], 1.01); }, {x});
  EXPECT_FALSE(r.ok) << r.message;
  EXPECT_GT(r.max_error, 1e-3);
  EXPECT_NE(r.message.find("FAILED"), std::string::npos);
}

TEST(Gradcheck, SkipsKinksButNotEverything) {
  // Elements exactly at the ReLU kink are skipped; the rest are checked.
  Tensor x = dev({-1.0, 0.0, 0.5, 2.0, 0.0, -3.0}, {6});
  auto r = ag::gradcheck([](const std::vector<Variable>& v) { return relu(v[0]); }, {x});
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.skipped, 2);
  EXPECT_EQ(r.checked, 4);
  // All at the kink: too many skipped, the check must fail rather than pass vacuously.
  auto r2 = ag::gradcheck([](const std::vector<Variable>& v) { return relu(v[0]); },
                          {dev({0.0, 0.0, 0.0}, {3})});
  EXPECT_FALSE(r2.ok) << r2.message;
}

TEST(Gradcheck, RejectsFloat32Inputs) {
  EXPECT_THROW(ag::gradcheck([](const std::vector<Variable>& v) { return v[0]; },
                             {Tensor::zeros({2}, DType::F32)}),
               Error);
}
