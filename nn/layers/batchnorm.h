// nn::BatchNorm: batch normalisation over (N, C, H, W) or (N, F) (one class for
// both; the statistics are per channel / feature, dimension 1).
// Parameters: weight (gamma, init 1) and bias (beta, init 0) when affine.
// Buffers: running_mean (init 0), running_var (init 1) (no num_batches_tracked:
// the momentum is fixed, so nothing reads it). Training mode normalises with the batch statistics and updates
// the running ones with `momentum` (unbiased variance, as PyTorch); evaluation
// mode uses the running statistics. Formulas in kernels/batchnorm.h.
#pragma once
#include <cstdint>

#include "autograd/ops_layers.h"
#include "runtime/comm.h"
#include "nn/module.h"

namespace mn::nn {

struct BatchNormOptions {
  int64_t num_features = 1;
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = true;
  bool track_running_stats = true;  // false: batch statistics in eval mode too
  DType dtype = DType::F32;
  Device device = Device::cpu();
  BatchNormOptions() = default;
  explicit BatchNormOptions(int64_t c) : num_features(c) {}
  BatchNormOptions& on(Device d) { device = d; return *this; }
  BatchNormOptions& of(DType t) { dtype = t; return *this; }
};

class BatchNorm : public Module {
 public:
  explicit BatchNorm(const BatchNormOptions& o);
  explicit BatchNorm(int64_t num_features) : BatchNorm(BatchNormOptions(num_features)) {}
  // (N, C, ...) -> same shape
  Variable forward(const Variable& x) override;

  const Variable& weight() const { return weight_; }  // undefined when !affine
  const Variable& bias() const { return bias_; }
  // Undefined tensors when !track_running_stats.
  Tensor running_mean() const { return running_mean_ ? *running_mean_ : Tensor(); }
  Tensor running_var() const { return running_var_ ? *running_var_ : Tensor(); }
  const BatchNormOptions& options() const { return opt_; }
  // Training-mode statistics over every rank of `comm` (ag::sync_batch_norm); null:
  // this rank's rows only. Evaluation mode never communicates (rank 0 validates alone).
  void sync_with(Communicator* comm) { sync_ = comm; }
  Communicator* synced_with() const { return sync_; }

 private:
  BatchNormOptions opt_;
  Communicator* sync_ = nullptr;
  Variable weight_, bias_;
  Tensor* running_mean_ = nullptr;  // owned by Module's buffer list (stable address)
  Tensor* running_var_ = nullptr;
};
using BatchNorm2d = BatchNorm;
using BatchNorm1d = BatchNorm;

}  // namespace mn::nn
