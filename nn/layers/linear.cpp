// nn::Linear (nn/layers/linear.h).
#include "nn/layers/linear.h"

#include <cmath>

#include "nn/init.h"

namespace mn::nn {

Linear::Linear(const LinearOptions& o, Generator& g) : opt_(o) {
  MN_CHECK(o.in_features >= 1 && o.out_features >= 1, "Linear: features must be >= 1, got in ",
           o.in_features, " out ", o.out_features);
  Tensor w = Tensor::empty({o.out_features, o.in_features}, o.dtype, o.device);
  init::kaiming_uniform_(w, std::sqrt(5.0), init::FanMode::FanIn, init::Nonlinearity::LeakyReLU, g);
  weight_ = register_parameter("weight", w);
  if (o.bias) {
    const double bound = 1.0 / std::sqrt(double(o.in_features));
    Tensor b = Tensor::empty({o.out_features}, o.dtype, o.device);
    init::uniform_(b, -bound, bound, g);
    bias_ = register_parameter("bias", b);
  }
}

Variable Linear::forward(const Variable& x) { return ag::linear(x, weight_, bias_); }

void Linear::share_parameters_from(const Linear& other) {
  MN_CHECK(other.bias_.defined() == bias_.defined(),
           "Linear::share_parameters_from: one layer has a bias and the other does not");
  share_parameter("weight", other.weight_);
  weight_ = other.weight_;
  if (bias_.defined()) {
    share_parameter("bias", other.bias_);
    bias_ = other.bias_;
  }
}

}  // namespace mn::nn
