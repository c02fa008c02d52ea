// nn::BatchNorm (nn/layers/batchnorm.h).
#include "nn/layers/batchnorm.h"

#include "autograd/ops_dist.h"

namespace mn::nn {

BatchNorm::BatchNorm(const BatchNormOptions& o) : opt_(o) {
  const int64_t C = o.num_features;
  MN_CHECK(C >= 1, "BatchNorm: num_features must be >= 1, got ", C);
  if (o.affine) {
    weight_ = register_parameter("weight", Tensor::ones({C}, o.dtype, o.device));
    bias_ = register_parameter("bias", Tensor::zeros({C}, o.dtype, o.device));
  }
  if (o.track_running_stats) {
    running_mean_ = &register_buffer("running_mean", Tensor::zeros({C}, o.dtype, o.device));
    running_var_ = &register_buffer("running_var", Tensor::ones({C}, o.dtype, o.device));
  }
}

Variable BatchNorm::forward(const Variable& x) {
  MN_CHECK(x.defined() && x.dim() >= 2 && x.size(1) == opt_.num_features,
           "BatchNorm: expected (N, ", opt_.num_features, ", ...) input, got ",
           x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const bool use_batch_stats = is_training() || !opt_.track_running_stats;
  Tensor rm = running_mean_ ? *running_mean_ : Tensor();
  Tensor rv = running_var_ ? *running_var_ : Tensor();
  if (sync_ && is_training()) return ag::sync_batch_norm(x, weight_, bias_, rm, rv, opt_.momentum, opt_.eps, *sync_);
  return ag::batch_norm(x, weight_, bias_, rm, rv, use_batch_stats, opt_.momentum, opt_.eps);
}

}  // namespace mn::nn
