// Differentiable matmul: forward and backward are calls to kernels::matmul
// with transpose flags (CPU or CUDA, float or double).
//
// With opA = op(a) (M, K), opB = op(b) (K, N) and G = dL/dC (M, N):
//   d opA = G opB^T              d opB = opA^T G
//   !trans_a: da = G  opB^T  = matmul(G, b, false, !trans_b)
//    trans_a: da = opB G^T   = matmul(b, G, trans_b, true)       (da is (K, M))
//   !trans_b: db = opA^T G   = matmul(a, G, !trans_a, false)
//    trans_b: db = G^T opA   = matmul(G, a, true, trans_a)       (db is (N, K))
// The same formulas hold per batch element for 3-D operands.
#include "autograd/ops_matmul.h"

#include "kernels/gemm.h"

namespace mn::ag {

Variable matmul(const Variable& a, const Variable& b, bool trans_a, bool trans_b) {
  MN_CHECK(a.defined() && b.defined(), "matmul: undefined Variable");
  Tensor out = kernels::matmul(a.data(), b.data(), trans_a, trans_b);
  if (!any_requires_grad({a, b})) return make_variable(out, {a, b}, nullptr, "matmul");
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  // Each gradient needs the other operand only.
  Tensor sa = need_b ? a.data() : Tensor();
  Tensor sb = need_a ? b.data() : Tensor();
  BackwardFn backward = [sa, sb, trans_a, trans_b, need_a,
                         need_b](const Tensor& g) -> std::vector<Tensor> {
    Tensor ga, gb;
    if (need_a) {
      ga = trans_a ? kernels::matmul(sb, g, trans_b, true)
                   : kernels::matmul(g, sb, false, !trans_b);
    }
    if (need_b) {
      gb = trans_b ? kernels::matmul(g, sa, true, trans_a)
                   : kernels::matmul(sa, g, !trans_a, false);
    }
    return {ga, gb};
  };
  return make_variable(out, {a, b}, std::move(backward), "matmul");
}

}  // namespace mn::ag
