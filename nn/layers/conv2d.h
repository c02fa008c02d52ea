// nn::Conv2d: a 2-D convolution layer with weight (K, C, R, S) and optional bias (K).
// Default initialisation is PyTorch's: weight kaiming_uniform_(a = sqrt(5)), i.e.
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
// fan_in = C*R*S, drawn from the given Philox generator (same values on CPU/GPU).
#pragma once
#include <cstdint>

#include "autograd/ops_conv.h"
#include "nn/module.h"
#include "runtime/rng.h"

namespace mn::nn {

struct Conv2dOptions {
  int64_t in_channels = 1, out_channels = 1;
  int64_t kernel_h = 3, kernel_w = 3;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  bool bias = true;
  kernels::Conv2dAlgo algo = kernels::Conv2dAlgo::Default;
  DType dtype = DType::F32;
  Device device = Device::cpu();

  Conv2dOptions() = default;
  Conv2dOptions(int64_t in, int64_t out, int64_t kernel)
      : in_channels(in), out_channels(out), kernel_h(kernel), kernel_w(kernel) {}
  Conv2dOptions& stride(int64_t s) { stride_h = stride_w = s; return *this; }
  Conv2dOptions& padding(int64_t p) { pad_h = pad_w = p; return *this; }
  Conv2dOptions& dilation(int64_t d) { dilation_h = dilation_w = d; return *this; }
  Conv2dOptions& with_bias(bool b) { bias = b; return *this; }
  Conv2dOptions& on(Device d) { device = d; return *this; }
  Conv2dOptions& of(DType t) { dtype = t; return *this; }
};

class Conv2d : public Module {
 public:
  explicit Conv2d(const Conv2dOptions& o, Generator& g = default_generator());
  Conv2d(int64_t in, int64_t out, int64_t kernel, Generator& g = default_generator())
      : Conv2d(Conv2dOptions(in, out, kernel), g) {}

  // (N, C, H, W) -> (N, K, P, Q)
  Variable forward(const Variable& x) override;
  // relu(forward(x)) as one node: the same values; on CUDA's tensor-core path the bias
  // and the ReLU run in the convolution's epilogue (kernels/conv2d.h, Conv2dParams::relu).
  Variable forward_relu(const Variable& x);
  // max_pool2d(relu(forward(x)), pool) as one node (ag::conv2d_relu_max_pool2d): the same
  // values and gradients; its backward applies ReLU's inside the max-pool backward.
  Variable forward_relu_max_pool(const Variable& x, const kernels::Pool2dParams& pool);

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }  // undefined when options.bias is false
  const Conv2dOptions& options() const { return opt_; }
  kernels::Conv2dParams params() const;
  // Makes this layer use `other`'s weight and bias objects (weight sharing).
  void share_parameters_from(const Conv2d& other);

 private:
  Conv2dOptions opt_;
  Variable weight_, bias_;
};

}  // namespace mn::nn
