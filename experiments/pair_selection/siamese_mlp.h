// The study's siamese MLP, fused for batch-16 CPU training: three Dense(300)
// layers with ReLU, Dropout(0.2) after the first two (the authors' Keras code),
// Euclidean distance between the two branches' embeddings, Hadsell's squared
// contrastive loss, SGD with momentum.
//
// Why not the autograd path: at 16 pairs per step the work is ~65 MFLOP and the
// study runs 450,000 steps, so per-op dispatch, tape nodes and allocations would
// cost more than the arithmetic. This class owns every buffer (allocated once in
// the constructor) and calls the library's GEMM (kernels/gemm.h) directly; a
// step allocates nothing. tests/experiments/test_pair_selection.cpp checks its
// loss and gradients against nn::contrastive_loss through the autograd tape.
//
// Conventions (chosen to match Keras 1.2 / the authors' code):
// - weights Glorot-uniform, biases zero (Keras 1.2's Dense), or PyTorch's
//   nn.Linear default (kaiming_uniform_(a = sqrt 5) = U(+-1/sqrt(fan_in)) for
//   the weights and the same bound for the biases); weight stored (in, out) so
//   y = x W + b;
// - inverted dropout (kept activations scaled by 1 / (1 - p)); each branch of a
//   pair draws its own mask (Keras applies the shared model twice);
// - loss = mean over the batch of (1 - Y) D^2 + Y max(0, M - D)^2, without
//   Hadsell's 1/2 (the code's and nn::contrastive_loss's normalisation);
//   D = sqrt(max(|e1 - e2|^2, eps)), eps = 1e-12 as kernels::kDistEps;
// - SGD momentum as Keras: v = mu v - lr g; w += v; or RMSprop as Keras 1.2
//   (the optimiser of Keras's mnist_siamese example): a = rho a + (1 - rho) g^2;
//   w -= lr g / (sqrt(a) + eps), eps = 1e-8; or Adam through the library's
//   fused step (kernels/optim.h, PyTorch's form: bias-corrected moments,
//   p -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps); Keras 1.2 puts
//   eps next to the uncorrected sqrt(v), a difference of order eps).
#pragma once
#include <cstdint>
#include <vector>

#include "experiments/pair_selection/pairs.h"
#include "kernels/optim.h"

namespace mn::pairsel {

enum class Optimizer { Sgd, RmsProp, Adam };
enum class Init { Glorot, Torch };  // Keras 1.2 Dense / PyTorch nn.Linear defaults

struct MlpConfig {
  int64_t input = 784;
  std::vector<int64_t> hidden = {300, 300, 300};  // the last one is the embedding
  double dropout = 0.2;
  double margin = 1.0;
  double lr = 1e-3;
  double momentum = 0.8;
  Optimizer optimizer = Optimizer::Sgd;
  double rho = 0.9;      // RMSprop's decay of the squared-gradient average
  double beta1 = 0.9, beta2 = 0.999;  // Adam's moment decays
  double eps = 1e-8;     // RMSprop's and Adam's denominator epsilon
  Init init = Init::Glorot;
  int64_t batch = 16;    // pairs per step
};

class SiameseMlp {
 public:
  SiameseMlp(const MlpConfig& cfg, uint64_t seed);
  // Not copyable: Adam's plan holds pointers into this net's buffers.
  SiameseMlp(const SiameseMlp&) = delete;
  SiameseMlp& operator=(const SiameseMlp&) = delete;

  // One epoch over `pairs` of the n rows of `x` (n, input), in the given order
  // (callers shuffle or not), batches of cfg.batch pairs (the last one may be
  // short). Returns the mean training loss over the pairs.
  double train_epoch(const float* x, int64_t n, const std::vector<Pair>& pairs);
  // Embeddings (n, emb) of rows (n, input), dropout off.
  void embed(const float* x, int64_t n, float* out);
  // Current loss of every pair (dropout off), from embeddings `emb` (n, emb).
  std::vector<float> pair_losses(const float* emb, const std::vector<Pair>& pairs) const;

  int64_t embedding_dim() const { return cfg_.hidden.back(); }
  const MlpConfig& config() const { return cfg_; }

  // For the gradient test: the parameters and their last gradients, per layer.
  std::vector<float>& weight(size_t l) { return w_[l]; }
  std::vector<float>& bias(size_t l) { return b_[l]; }
  const std::vector<float>& weight_grad(size_t l) const { return gw_[l]; }
  const std::vector<float>& bias_grad(size_t l) const { return gb_[l]; }
  // Forward + backward of one batch (rows of x: left members then right
  // members), gradients into weight_grad/bias_grad, no update. `train` turns
  // dropout on. Returns the mean loss.
  double forward_backward(const float* left_rows, const float* right_rows,
                          const uint8_t* impostor, int64_t nb, bool train);

 private:
  // MNIST inputs are ~80 % zeros: the first layer's forward (x W) and weight
  // gradient (x^T dz) then cost a fifth of a dense GEMM as sparse-row sums.
  // Used when a batch is at most kSparseDensity non-zero; exact either way
  // (the same products, summed in another order).
  static constexpr double kSparseDensity = 0.5;
  struct SparseRows {
    std::vector<int32_t> ptr, col;  // (rows + 1), (nnz)
    std::vector<float> val;         // (nnz)
    // Fills from dense rows (rows, in); returns false (and leaves it unusable)
    // when denser than kSparseDensity.
    bool build(const float* x, int64_t rows, int64_t in);
  };
  // Layer outputs (after ReLU and, with `train`, dropout) of `rows` rows of
  // `in` into acts[l] (rows, out_l). The first layer reads `in_csr` instead
  // when it is non-null (the same rows in compressed sparse rows).
  void forward(const float* in, const SparseRows* in_csr, int64_t rows, bool train,
               std::vector<std::vector<float>>& acts);
  void sgd_step();
  // Forward, loss and backward of the batch in x_ (and csr_ when `sparse`):
  // rows 0..nb-1 left members, nb..2nb-1 right members.
  double step(const uint8_t* impostor, int64_t nb, bool train, bool sparse);

  MlpConfig cfg_;
  uint64_t seed_, rng_block_ = 0;
  std::vector<int64_t> dims_;                       // input, hidden...
  std::vector<std::vector<float>> w_, b_, gw_, gb_, vw_, vb_;  // v: momentum, RMSprop's average or Adam's m
  std::vector<std::vector<float>> sw_, sb_;  // Adam's second moments
  kernels::MultiTensorPlan adam_plan_;       // Adam: (w, b) of every layer, built once
  int64_t adam_t_ = 0;                       // Adam's step count
  // Training buffers for R = 2 * batch rows (left members, then right): x_
  // (R, in); a_[l] (R, out_l) the layer's output after ReLU and dropout (its
  // sign is all the backward needs: a kept unit > 0 had z > 0); grad_[l] (R,
  // out_l) d loss / d a_[l]. eval_a_: the same for kEvalRows rows, dropout off.
  static constexpr int64_t kEvalRows = 512;
  std::vector<float> x_;
  std::vector<uint8_t> imp_;  // (batch) the batch's labels
  std::vector<float> keep_;   // (R, max width) dropout scale: 0 or 1 / (1 - p)
  std::vector<std::vector<float>> a_, grad_, eval_a_;
  SparseRows csr_;       // the current batch (or evaluation chunk)
  SparseRows data_csr_;  // the epoch's inputs
};

}  // namespace mn::pairsel
