// Tensor-level dispatch of the distances (kernels/distance.h): argument checks
// with shapes in the messages, the centring of the Gram-based pairwise metrics,
// the self case, and the CPU / CUDA choice (runtime/dispatch.h; no silent
// fallback). Also kernels::pairwise_distance_matrix, the miners' entry point
// (declared in kernels/miners.h), which is the same pairwise implementation.
#include "kernels/distance.h"

#include "kernels/elementwise.h"
#include "kernels/miners.h"
#include "kernels/reduce.h"
#include "runtime/dispatch.h"

namespace mn::kernels {

const char* metric_name(Metric m) {
  switch (m) {
    case Metric::L1: return "l1";
    case Metric::L2Squared: return "l2_squared";
    case Metric::L2: return "l2";
    case Metric::Cosine: return "cosine";
  }
  return "unknown metric";
}

const char* pairwise_name(Metric m) {
  switch (m) {
    case Metric::L1: return "pairwise_l1";
    case Metric::L2Squared: return "pairwise_sqeuclidean";
    case Metric::L2: return "pairwise_euclidean";
    case Metric::Cosine: return "pairwise_cosine";
  }
  return "pairwise_distance";
}

namespace {
void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a, "a");
  check_defined(op, b, "b");
  check_floating(op, a);
  check_same_dtype(op, a, b);
  check_same_device(op, a, b);
}
void check_row_metric(const char* op, Metric k) {
  MN_CHECK(k == Metric::L1 || k == Metric::L2Squared || k == Metric::L2, op, ": metric ",
           metric_name(k), " is not a row distance (row distances are l1, l2_squared and l2; "
           "for cosine use pairwise_distance)");
}

// b is a: the same elements in the same layout (a miner's (B, B) matrix, or
// pairwise_distance(x, x)).
bool same_rows(const Tensor& a, const Tensor& b) {
  return a.numel() > 0 && a.raw_data() == b.raw_data() && a.shape() == b.shape() &&
         a.strides() == b.strides();
}
}  // namespace

Tensor abs_diff_forward(const Tensor& a_in, const Tensor& b_in) {
  const char* op = "abs_diff";
  check_pair(op, a_in, b_in);
  check_same_shape(op, a_in, b_in);
  Tensor a = a_in.contiguous(), b = b_in.contiguous();
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (a.numel() == 0) return y;
  MN_DISPATCH_KERNEL(op, a, abs_diff_forward, a.numel(), a.data<scalar_t>(), b.data<scalar_t>(), y.data<scalar_t>());
  return y;
}

std::pair<Tensor, Tensor> abs_diff_backward(const Tensor& a_in, const Tensor& b_in,
                                            const Tensor& gy_in) {
  const char* op = "abs_diff_backward";
  check_pair(op, a_in, b_in);
  check_same_shape(op, a_in, gy_in);
  Tensor a = a_in.contiguous(), b = b_in.contiguous(), gy = gy_in.contiguous();
  Tensor ga = Tensor::empty(a.shape(), a.dtype(), a.device());
  Tensor gb = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (a.numel() == 0) return {ga, gb};
  MN_DISPATCH_KERNEL(op, a, abs_diff_backward, a.numel(), a.data<scalar_t>(), b.data<scalar_t>(),
                     gy.data<scalar_t>(), ga.data<scalar_t>(), gb.data<scalar_t>());
  return {ga, gb};
}

Tensor row_distance_forward(RowDist k, const Tensor& a_in, const Tensor& b_in) {
  const char* op = "row_distance";
  check_row_metric(op, k);
  check_pair(op, a_in, b_in);
  check_dim(op, a_in, 2, "a");
  check_same_shape(op, a_in, b_in);
  Tensor a = a_in.contiguous(), b = b_in.contiguous();
  const int64_t N = a.size(0), D = a.size(1);
  Tensor out = Tensor::empty({N}, a.dtype(), a.device());
  if (N == 0) return out;
  MN_DISPATCH_KERNEL(op, a, row_distance_forward, k, N, D, a.data<scalar_t>(), b.data<scalar_t>(), out.data<scalar_t>());
  return out;
}

std::pair<Tensor, Tensor> row_distance_backward(RowDist k, const Tensor& a_in, const Tensor& b_in,
                                                const Tensor& out_in, const Tensor& gout_in) {
  const char* op = "row_distance_backward";
  check_row_metric(op, k);
  check_pair(op, a_in, b_in);
  check_dim(op, a_in, 2, "a");
  check_same_shape(op, a_in, b_in);
  check_same_shape(op, out_in, gout_in);
  Tensor a = a_in.contiguous(), b = b_in.contiguous(), out = out_in.contiguous(),
         gout = gout_in.contiguous();
  const int64_t N = a.size(0), D = a.size(1);
  MN_CHECK(out.numel() == N, op, ": out must have N = ", N, " elements, got ",
           shape_str(out.shape()));
  Tensor ga = Tensor::empty(a.shape(), a.dtype(), a.device());
  Tensor gb = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (a.numel() == 0) return {ga, gb};
  MN_DISPATCH_KERNEL(op, a, row_distance_backward, k, N, D, a.data<scalar_t>(), b.data<scalar_t>(),
                     out.data<scalar_t>(), gout.data<scalar_t>(), ga.data<scalar_t>(),
                     gb.data<scalar_t>());
  return {ga, gb};
}

PairwiseResult pairwise_distance_forward(Pairwise m, const Tensor& a_in, const Tensor& b_in) {
  const char* op = pairwise_name(m);
  check_pair(op, a_in, b_in);
  check_dim(op, a_in, 2, "a");
  check_dim(op, b_in, 2, "b");
  MN_CHECK(a_in.size(1) == b_in.size(1), op, ": feature sizes differ: a ",
           shape_str(a_in.shape()), " vs b ", shape_str(b_in.shape()));
  const bool self = same_rows(a_in, b_in);
  Tensor a = a_in.contiguous();
  Tensor b = self ? a : b_in.contiguous();
  const int64_t M = a.size(0), N = b.size(0), D = a.size(1);
  const bool gram = m == Metric::L2Squared || m == Metric::L2;
  if (gram && self) {
    // Centred on the mean (see below); b stays the same tensor as a, so the
    // kernels take the self path (norms from the Gram diagonal, exact zeros on
    // the diagonal). This is the miners' matrix: the same operations in the
    // same order as before the distance code was unified.
    a = binary(BinaryOp::Sub, a, mean(a, {0}, true));
    b = a;
  } else if (gram && M > 0 && N > 0) {
    // Euclidean distances do not change when both sets move by the same vector,
    // but the expansion's rounding error (about ulp(|a|^2)) does: embeddings
    // clustered far from the origin (e.g. sigmoid outputs near 0.5) lose every
    // small distance to cancellation in float32. Centring both sets on their
    // joint mean keeps the norms small. The backward (gA_i = sum_j W_ij (A_i - B_j))
    // is translation invariant too, so it may use the original rows.
    Tensor c = binary_scalar(BinaryOp::Mul,
                             binary(BinaryOp::Add, sum(a, {0}, true), sum(b, {0}, true)),
                             1.0 / static_cast<double>(M + N));  // (1, D)
    a = binary(BinaryOp::Sub, a, c);
    b = binary(BinaryOp::Sub, b, c);
  }
  // L1 needs no norms; they are still allocated (zeros) so that every metric
  // returns the same PairwiseResult layout.
  PairwiseResult r{Tensor::empty({M, N}, a.dtype(), a.device()),
                   Tensor::zeros({M}, a.dtype(), a.device()),
                   Tensor::zeros({N}, a.dtype(), a.device())};
  if (M == 0 || N == 0) return r;
  MN_DISPATCH_KERNEL(op, a, pairwise_forward, m, M, N, D, a.data<scalar_t>(), b.data<scalar_t>(),
                     r.out.data<scalar_t>(), r.na.data<scalar_t>(), r.nb.data<scalar_t>());
  return r;
}

std::pair<Tensor, Tensor> pairwise_distance_backward(Pairwise m, const Tensor& a_in,
                                                     const Tensor& b_in, const PairwiseResult& f,
                                                     const Tensor& gout_in) {
  const char* op = "pairwise_distance_backward";
  check_pair(op, a_in, b_in);
  check_same_shape(op, f.out, gout_in);
  Tensor a = a_in.contiguous(), b = b_in.contiguous(), gout = gout_in.contiguous();
  const int64_t M = a.size(0), N = b.size(0), D = a.size(1);
  Tensor ga = Tensor::zeros(a.shape(), a.dtype(), a.device());
  Tensor gb = Tensor::zeros(b.shape(), b.dtype(), b.device());
  if (M == 0 || N == 0 || D == 0) return {ga, gb};
  Tensor work = Tensor::empty({M * N + M + N}, a.dtype(), a.device());
  MN_DISPATCH_KERNEL(op, a, pairwise_backward, m, M, N, D, a.data<scalar_t>(), b.data<scalar_t>(),
                     f.out.data<scalar_t>(), f.na.data<scalar_t>(), f.nb.data<scalar_t>(),
                     gout.data<scalar_t>(), ga.data<scalar_t>(), gb.data<scalar_t>(),
                     work.data<scalar_t>());
  return {ga, gb};
}

Tensor pairwise_distance_matrix(const Tensor& e, Metric m) {
  const char* op = "pairwise_distance_matrix";
  check_defined(op, e, "e");
  check_floating(op, e);
  check_dim(op, e, 2, "e");
  return pairwise_distance_forward(m, e, e).out;
}

Tensor pairwise_distance_matrix(const Tensor& e, bool squared) {
  return pairwise_distance_matrix(e, squared ? Metric::L2Squared : Metric::L2);
}

}  // namespace mn::kernels
