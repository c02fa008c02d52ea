// CUDA bias helpers for the linear layer (kernels/linear.h).
#include "kernels/linear.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {
template <typename T>
__global__ void bias_add_rows_k(int64_t rows, int64_t cols, const T* __restrict__ b,
                                T* __restrict__ y) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] += b[i % cols];
}

// Block (32, 8): 32 columns per block, 8 row-strided partial sums per column,
// combined in a fixed order through shared memory.
template <typename T>
__global__ void sum_rows_k(int64_t rows, int64_t cols, const T* __restrict__ dy,
                           T* __restrict__ db) {
  __shared__ T part[8][33];
  const int64_t j = blockIdx.x * 32 + threadIdx.x;
  T acc = 0;
  if (j < cols)
    for (int64_t r = threadIdx.y; r < rows; r += 8) acc += dy[r * cols + j];
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    T s = 0;
    for (int k = 0; k < 8; ++k) s += part[k][threadIdx.x];
    db[j] = s;
  }
}
}  // namespace

template <typename T>
void bias_add_rows_cuda(int64_t rows, int64_t cols, const T* b, T* y) {
  bias_add_rows_k<T><<<cuda::grid_for(rows * cols), 256, 0, cuda::stream()>>>(rows, cols, b, y);
  CUDA_CHECK_LAUNCH("bias_add_rows");
}

template <typename T>
void sum_rows_cuda(int64_t rows, int64_t cols, const T* dy, T* db) {
  const unsigned blocks = unsigned((cols + 31) / 32);
  sum_rows_k<T><<<blocks, dim3(32, 8), 0, cuda::stream()>>>(rows, cols, dy, db);
  CUDA_CHECK_LAUNCH("sum_rows");
}

template void bias_add_rows_cuda<float>(int64_t, int64_t, const float*, float*);
template void bias_add_rows_cuda<double>(int64_t, int64_t, const double*, double*);
template void sum_rows_cuda<float>(int64_t, int64_t, const float*, float*);
template void sum_rows_cuda<double>(int64_t, int64_t, const double*, double*);

}  // namespace mn::kernels
