// CPU dropout: one Philox block per four elements, parallel over blocks; the mask
// and the output are written in the same pass.
#include "kernels/dropout.h"

#include "runtime/dispatch.h"
#include "runtime/parallel.h"
#include "runtime/philox.h"

namespace mn::kernels {

template <typename T>
void dropout_forward_cpu(int64_t n, const T* x, double p, uint64_t seed, uint64_t offset,
                         uint8_t* mask, T* y) {
  const float pf = static_cast<float>(p);
  const T keep = T(1.0 - p);
  const int64_t blocks = (n + 3) / 4;
  parallel_for(0, blocks, 4096, [&](int64_t b0, int64_t b1) {
    for (int64_t j = b0; j < b1; ++j) {
      const Philox4 r = philox4x32_10(seed, offset + static_cast<uint64_t>(j));
      const int64_t base = j * 4;
      const int cnt = n - base < 4 ? static_cast<int>(n - base) : 4;
      for (int k = 0; k < cnt; ++k) {
        const bool kept = philox_uniform_float(r.v[k]) >= pf;
        mask[base + k] = kept ? 1 : 0;
        if (x) y[base + k] = kept ? x[base + k] / keep : T(0);
      }
    }
  });
}

template <typename T>
void dropout_backward_cpu(int64_t n, const T* gy, const uint8_t* mask, double p, T* gx) {
  const T keep = T(1.0 - p);
  parallel_for(0, n, 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) gx[i] = mask[i] ? gy[i] / keep : T(0);
  });
}

template void dropout_forward_cpu<float>(int64_t, const float*, double, uint64_t, uint64_t,
                                         uint8_t*, float*);
template void dropout_forward_cpu<double>(int64_t, const double*, double, uint64_t, uint64_t,
                                          uint8_t*, double*);
template void dropout_backward_cpu<float>(int64_t, const float*, const uint8_t*, double, float*);
template void dropout_backward_cpu<double>(int64_t, const double*, const uint8_t*, double,
                                           double*);

DropoutResult dropout_forward(const Tensor& x_in, double p, uint64_t seed, uint64_t offset) {
  const char* op = "dropout";
  check_defined(op, x_in, "x");
  check_floating(op, x_in);
  MN_CHECK(p >= 0.0 && p <= 1.0, op, ": p must be in [0, 1], got ", p);
  Tensor x = x_in.contiguous();
  DropoutResult r{Tensor::empty(x.shape(), x.dtype(), x.device()),
                  Tensor::empty(x.shape(), DType::U8, x.device()), seed, offset};
  if (x.numel() == 0) return r;
  MN_DISPATCH_KERNEL(op, x, dropout_forward,
      x.numel(), x.data<scalar_t>(), p, seed, offset, r.mask.data<uint8_t>(), r.y.data<scalar_t>());
  return r;
}

DropoutResult dropout_forward(const Tensor& x, double p, Generator& g) {
  check_defined("dropout", x, "x");
  const uint64_t blocks = static_cast<uint64_t>((x.numel() + 3) / 4);
  const uint64_t seed = g.seed();
  const uint64_t offset = g.advance(blocks);
  return dropout_forward(x, p, seed, offset);
}

Tensor dropout_backward(const Tensor& gy_in, const Tensor& mask_in, double p) {
  const char* op = "dropout_backward";
  check_defined(op, gy_in, "grad_output");
  check_defined(op, mask_in, "mask");
  check_same_shape(op, gy_in, mask_in);
  check_same_device(op, gy_in, mask_in);
  MN_CHECK(mask_in.dtype() == DType::U8, op, ": mask must be uint8, got ",
           dtype_name(mask_in.dtype()));
  Tensor gy = gy_in.contiguous(), mask = mask_in.contiguous();
  Tensor gx = Tensor::empty(gy.shape(), gy.dtype(), gy.device());
  if (gy.numel() == 0) return gx;
  MN_DISPATCH_KERNEL(op, gy, dropout_backward,
      gy.numel(), gy.data<scalar_t>(), mask.data<uint8_t>(), p, gx.data<scalar_t>());
  return gx;
}

Tensor dropout_mask(const Shape& shape, double p, uint64_t seed, uint64_t offset, Device device) {
  Tensor x = Tensor::zeros(shape, DType::F32, device);
  return dropout_forward(x, p, seed, offset).mask;
}

}  // namespace mn::kernels
