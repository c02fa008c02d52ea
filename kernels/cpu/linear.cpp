// CPU bias helpers for the linear layer (kernels/linear.h).
#include <algorithm>
#include <vector>

#include "kernels/linear.h"
#include "runtime/parallel.h"

namespace mn::kernels {

template <typename T>
void bias_add_rows_cpu(int64_t rows, int64_t cols, const T* b, T* y) {
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   T* row = y + r * cols;
                   for (int64_t j = 0; j < cols; ++j) row[j] += b[j];
                 }
               });
}

// Columns split over threads; each column's rows summed in order (deterministic).
template <typename T>
void sum_rows_cpu(int64_t rows, int64_t cols, const T* dy, T* db) {
  parallel_for(0, cols, 256, [&](int64_t c0, int64_t c1) {
    std::fill(db + c0, db + c1, T(0));
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = dy + r * cols;
      for (int64_t j = c0; j < c1; ++j) db[j] += row[j];
    }
  });
}

template void bias_add_rows_cpu<float>(int64_t, int64_t, const float*, float*);
template void bias_add_rows_cpu<double>(int64_t, int64_t, const double*, double*);
template void sum_rows_cpu<float>(int64_t, int64_t, const float*, float*);
template void sum_rows_cpu<double>(int64_t, int64_t, const double*, double*);

}  // namespace mn::kernels
