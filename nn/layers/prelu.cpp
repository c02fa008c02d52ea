// nn::PReLU (see prelu.h).
#include "nn/layers/prelu.h"

#include "runtime/dispatch.h"

namespace mn::nn {

PReLU::PReLU(const PReLUOptions& o) {
  MN_CHECK(o.num_parameters >= 1, "PReLU: num_parameters must be >= 1 (1 shared slope or one per channel), got ",
           o.num_parameters);
  Tensor w = Tensor::empty({o.num_parameters}, o.dtype, Device::cpu());
  MN_DISPATCH_FLOAT(o.dtype, "PReLU", [&] {
    for (int64_t i = 0; i < o.num_parameters; ++i) w.data<scalar_t>()[i] = static_cast<scalar_t>(o.init);
  });
  weight_ = register_parameter("weight", w.to(o.device));
}

}  // namespace mn::nn
