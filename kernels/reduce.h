// Reductions: sum, mean, max/argmax, min/argmin over all elements or over given
// dimensions (keepdim flag), var (biased/unbiased), and sum_to_shape, which undoes
// NumPy broadcasting in backward passes. CPU (float/double, multithreaded) and CUDA.
//
// Every reduction is planned as a contiguous (outer, r, inner) view of the input:
// the r reduced elements of output (o, i) sit at x[(o * r + k) * inner + i]. When
// the reduced dimensions are not adjacent the input is first permuted so that
// they are (a copy). Accumulation is in double for both float and double inputs,
// and the all-elements CPU sum adds fixed-size chunk partials in a fixed order,
// so the result does not depend on the thread count.
// Max/min: ties go to the FIRST index; a NaN wins (propagates) like in NumPy.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace mn::kernels {

enum class ReduceOp : int { Sum, Mean, Max, Min };

// x: (outer, r, inner) contiguous; out: (outer, inner); idx: (outer, inner) int64
// positions in [0, r) for Max/Min (may be null), ignored for Sum/Mean.
template <typename T>
void reduce_cpu(ReduceOp op, const T* x, int64_t outer, int64_t r, int64_t inner, T* out,
                int64_t* idx);
#ifdef MN_WITH_CUDA
// Same contract, device pointers. outer == inner == 1 uses a two-pass block
// reduction with warp shuffles; inner == 1 one warp (short rows) or one block
// (long rows) per output; inner > 1 one thread per output column (coalesced).
template <typename T>
void reduce_cuda(ReduceOp op, const T* x, int64_t outer, int64_t r, int64_t inner, T* out,
                 int64_t* idx);
#endif

// ---- Tensor level. `dims` empty = all elements. Negative dims count from the end.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Variance with divisor N - 1 (unbiased) or N (biased), N = number of reduced
// elements; two-pass (mean first) for accuracy.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, bool unbiased = true,
           bool keepdim = false);

struct ValuesIndices {
  Tensor values;   // x's dtype
  Tensor indices;  // int64, same shape as values
};
// Max / min along one dimension, with the index of the first extreme element.
ValuesIndices max_dim(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min_dim(const Tensor& x, int64_t dim, bool keepdim = false);
// Over all elements: a 0-d value and the 0-d flat (row-major) index.
ValuesIndices max_all(const Tensor& x);
ValuesIndices min_all(const Tensor& x);
inline Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false) { return max_dim(x, dim, keepdim).indices; }
inline Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false) { return min_dim(x, dim, keepdim).indices; }

// Sums g over the dimensions that broadcasting expanded so the result has
// `shape` (g's shape must be a broadcast of `shape`). Returns g itself when the
// shapes already match.
Tensor sum_to_shape(const Tensor& g, const Shape& shape);

// The dimensions of x, normalised (wrapped, sorted, unique); empty -> all.
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op);
// x's shape with the reduced dims set to 1 (keepdim) or removed.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);

}  // namespace mn::kernels
