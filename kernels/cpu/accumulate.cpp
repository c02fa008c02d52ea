// y += alpha * x on the CPU, and the device dispatch for gradient accumulation.
#include "kernels/accumulate.h"

#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace mn::kernels {

template <typename T>
void axpy_cpu(int64_t n, T alpha, const T* x, T* y) {
  parallel_for(0, n, 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] += alpha * x[i];
  });
}
template void axpy_cpu<float>(int64_t, float, const float*, float*);
template void axpy_cpu<double>(int64_t, double, const double*, double*);

void axpy_(Tensor& y, const Tensor& x, double alpha) {
  check_defined("axpy_", y, "y");
  check_defined("axpy_", x, "x");
  check_floating("axpy_", y);
  check_same_device("axpy_", y, x);
  check_same_dtype("axpy_", y, x);
  MN_CHECK(y.is_contiguous(), "axpy_: destination ", y.desc(), " must be contiguous");
  Tensor xc = x.shape() == y.shape() ? x.contiguous() : x.expand(y.shape()).contiguous();
  MN_DISPATCH_KERNEL("axpy_", y, axpy,
      y.numel(), static_cast<scalar_t>(alpha), xc.data<scalar_t>(), y.data<scalar_t>());
}

}  // namespace mn::kernels
