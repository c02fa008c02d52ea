// nn::Conv2d (nn/layers/conv2d.h).
#include "nn/layers/conv2d.h"

#include <cmath>

#include "nn/init.h"

namespace mn::nn {

Conv2d::Conv2d(const Conv2dOptions& o, Generator& g) : opt_(o) {
  MN_CHECK(o.in_channels >= 1 && o.out_channels >= 1 && o.kernel_h >= 1 && o.kernel_w >= 1,
           "Conv2d: channels and kernel size must be >= 1, got in ", o.in_channels, " out ",
           o.out_channels, " kernel (", o.kernel_h, ", ", o.kernel_w, ")");
  Tensor w = Tensor::empty({o.out_channels, o.in_channels, o.kernel_h, o.kernel_w}, o.dtype,
                           o.device);
  init::kaiming_uniform_(w, std::sqrt(5.0), init::FanMode::FanIn, init::Nonlinearity::LeakyReLU, g);
  weight_ = register_parameter("weight", w);
  if (o.bias) {
    const double bound = 1.0 / std::sqrt(double(o.in_channels * o.kernel_h * o.kernel_w));
    Tensor b = Tensor::empty({o.out_channels}, o.dtype, o.device);
    init::uniform_(b, -bound, bound, g);
    bias_ = register_parameter("bias", b);
  }
}

kernels::Conv2dParams Conv2d::params() const {
  kernels::Conv2dParams p;
  p.stride_h = opt_.stride_h, p.stride_w = opt_.stride_w;
  p.pad_h = opt_.pad_h, p.pad_w = opt_.pad_w;
  p.dilation_h = opt_.dilation_h, p.dilation_w = opt_.dilation_w;
  p.algo = opt_.algo;
  return p;
}

Variable Conv2d::forward(const Variable& x) { return ag::conv2d(x, weight_, bias_, params()); }

Variable Conv2d::forward_relu(const Variable& x) {
  kernels::Conv2dParams p = params();
  p.relu = true;
  return ag::conv2d(x, weight_, bias_, p);
}

Variable Conv2d::forward_relu_max_pool(const Variable& x, const kernels::Pool2dParams& pool) {
  return ag::conv2d_relu_max_pool2d(x, weight_, bias_, params(), pool);
}

void Conv2d::share_parameters_from(const Conv2d& other) {
  MN_CHECK(other.bias_.defined() == bias_.defined(),
           "Conv2d::share_parameters_from: one layer has a bias and the other does not");
  share_parameter("weight", other.weight_);
  weight_ = other.weight_;
  if (bias_.defined()) {
    share_parameter("bias", other.bias_);
    bias_ = other.bias_;
  }
}

}  // namespace mn::nn
