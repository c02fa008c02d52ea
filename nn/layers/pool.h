// nn::MaxPool2d and nn::AvgPool2d: parameter-free pooling layers over (N, C, H, W).
// Semantics (padding, ties, count_include_pad) in kernels/pool.h.
#pragma once
#include <cstdint>

#include "autograd/ops_conv.h"
#include "nn/module.h"

namespace mn::nn {

// kernel k, stride (0 = k), padding p; count_include_pad for AvgPool2d only.
inline kernels::Pool2dParams pool_params(int64_t kernel, int64_t stride = 0, int64_t pad = 0,
                                         bool count_include_pad = true) {
  kernels::Pool2dParams p;
  p.kernel_h = p.kernel_w = kernel;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.count_include_pad = count_include_pad;
  return p;
}

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(const kernels::Pool2dParams& p) : p_(p) {}
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t pad = 0)
      : p_(pool_params(kernel, stride, pad)) {}
  Variable forward(const Variable& x) override;
  const kernels::Pool2dParams& params() const { return p_; }

 private:
  kernels::Pool2dParams p_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(const kernels::Pool2dParams& p) : p_(p) {}
  explicit AvgPool2d(int64_t kernel, int64_t stride = 0, int64_t pad = 0,
                     bool count_include_pad = true)
      : p_(pool_params(kernel, stride, pad, count_include_pad)) {}
  Variable forward(const Variable& x) override;
  const kernels::Pool2dParams& params() const { return p_; }

 private:
  kernels::Pool2dParams p_;
};

}  // namespace mn::nn
