// ag::matmul: float64 gradient checks for every transpose combination, 2-D and
// batched, a check that gradients reach only the inputs that require them, an
// analytic check of the backward on a tiny case, and GPU parity of the
// gradients (skipped without a GPU).
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "autograd/ops_matmul.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

Shape operand_shape(bool batched, bool trans, int64_t rows, int64_t cols, int64_t B) {
  Shape s = trans ? Shape{cols, rows} : Shape{rows, cols};
  if (batched) s.insert(s.begin(), B);
  return s;
}

void check_matmul_grad(bool batched, bool ta, bool tb, Device dev) {
  const int64_t M = 5, K = 7, N = 4, B = 3;
  Tensor a = test::rand(operand_shape(batched, ta, M, K, B), -1, 1, DType::F64, dev, 11);
  Tensor b = test::rand(operand_shape(batched, tb, K, N, B), -1, 1, DType::F64, dev, 12);
  auto f = [&](const std::vector<ag::Variable>& v) { return ag::matmul(v[0], v[1], ta, tb); };
  // matmul is bilinear: central differences are exact up to rounding, so the
  // default float64 tolerance (1e-5 relative, eps 1e-6) has a wide margin.
  ag::GradcheckResult r = ag::gradcheck(f, {a, b});
  EXPECT_TRUE(r.ok) << "batched=" << batched << " ta=" << ta << " tb=" << tb << ": " << r.message;
  EXPECT_EQ(r.skipped, 0);
}

TEST(MatmulGrad, Gradcheck2DAllTransposes) {
  for (int t = 0; t < 4; ++t) check_matmul_grad(false, t & 1, t & 2, Device::cpu());
}

TEST(MatmulGrad, GradcheckBatchedAllTransposes) {
  for (int t = 0; t < 4; ++t) check_matmul_grad(true, t & 1, t & 2, Device::cpu());
}

// d/dA sum(A B) = 1 B^T: every row of dA is the row sums of B; d/dB = A^T 1.
TEST(MatmulGrad, AnalyticSumOfProduct) {
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector(std::vector<double>{1, -1, 2, 0.5, -3, 4}, {3, 2});
  ag::Variable va(a, true), vb(b, true);
  ag::Variable c = ag::matmul(va, vb);
  c.backward(Tensor::ones({2, 2}, DType::F64));
  // Row sums of b: 0, 2.5, 1 ; column sums of a: 5, 7, 9.
  EXPECT_TRUE(test::all_close(std::vector<double>{0, 2.5, 1, 0, 2.5, 1},
                              va.grad().to_double_vector(), 1e-15, 0));
  EXPECT_TRUE(test::all_close(std::vector<double>{5, 5, 7, 7, 9, 9},
                              vb.grad().to_double_vector(), 1e-15, 0));
}

TEST(MatmulGrad, OnlyRequiredGradients) {
  ag::Variable a(test::rand({3, 4}, -1, 1, DType::F64), true);
  ag::Variable b(test::rand({4, 2}, -1, 1, DType::F64), false);
  ag::Variable c = ag::matmul(a, b);
  EXPECT_TRUE(c.requires_grad());
  c.backward(Tensor::ones({3, 2}, DType::F64));
  EXPECT_TRUE(a.has_grad());
  EXPECT_FALSE(b.has_grad());
  EXPECT_EQ(a.grad().shape(), (Shape{3, 4}));
  ag::Variable d = ag::matmul(b.detach(), b.detach(), true, false);
  EXPECT_FALSE(d.requires_grad());
}

TEST(MatmulGradCuda, GradcheckOnGpuAllTransposes) {
  MN_SKIP_IF_NO_CUDA();
  for (int t = 0; t < 4; ++t) {
    check_matmul_grad(false, t & 1, t & 2, Device::cuda());
    check_matmul_grad(true, t & 1, t & 2, Device::cuda());
  }
}

TEST(MatmulGradCuda, GradientsMatchCpu) {
  MN_SKIP_IF_NO_CUDA();
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    Tensor a = test::rand(operand_shape(true, ta, 9, 33, 2), -1, 1, DType::F32, Device::cpu(), 21);
    Tensor b = test::rand(operand_shape(true, tb, 33, 17, 2), -1, 1, DType::F32, Device::cpu(), 22);
    Tensor g = test::rand({2, 9, 17}, -1, 1, DType::F32, Device::cpu(), 23);
    ag::Variable ac(a, true), bc(b, true), ag_(a.cuda(), true), bg(b.cuda(), true);
    ag::matmul(ac, bc, ta, tb).backward(g);
    ag::matmul(ag_, bg, ta, tb).backward(g.cuda());
    // float32 sums of <= 33 products of size <= 1: relative 1e-4 parity plus 1e-4 absolute.
    EXPECT_TRUE(test::all_close(ac.grad(), ag_.grad().cpu(), 1e-4, 1e-4));
    EXPECT_TRUE(test::all_close(bc.grad(), bg.grad().cpu(), 1e-4, 1e-4));
  }
}

}  // namespace
}  // namespace mn
