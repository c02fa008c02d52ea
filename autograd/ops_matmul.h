// Differentiable matrix product over our GEMM kernels (kernels/gemm.h).
#pragma once
#include "autograd/variable.h"

namespace mn::ag {

// op(a) * op(b) for a (M, K) and b (K, N) -> (M, N), or batched a (B, M, K) and
// b (B, K, N) -> (B, M, N). With trans_a, a is stored (K, M) [(B, K, M)]; with
// trans_b, b is stored (N, K) [(B, N, K)]. Both operands need the same rank.
// Backward (G = dL/d out):  d op(a) = G op(b)^T,  d op(b) = op(a)^T G, each one
// GEMM with transpose flags, so no transposed copy is ever materialised.
Variable matmul(const Variable& a, const Variable& b, bool trans_a = false, bool trans_b = false);

}  // namespace mn::ag
