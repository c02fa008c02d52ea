// The study's fused siamese MLP; see siamese_mlp.h.
#include "experiments/pair_selection/siamese_mlp.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/gemm.h"  // raw host-array GEMM launcher (no Tensor on this hot path)
#include "runtime/error.h"
#include "runtime/philox.h"

namespace mn::pairsel {

namespace {
constexpr float kEps = 1e-12f;  // kernels::kDistEps: D defined (and finite) at zero

// Hadsell's term for one pair; with g1 non-null also writes
// d(scale * L)/d e1 into g1 (d/d e2 is its negative). Returns L.
float contrastive_term(const float* e1, const float* e2, int64_t d, uint8_t impostor,
                       float margin, float* g1, float scale) {
  float s = 0.0f;
  for (int64_t j = 0; j < d; ++j) {
    const float t = e1[j] - e2[j];
    s += t * t;
  }
  float loss, coef;  // coef: d L / d e1 = coef * (e1 - e2)
  if (!impostor) {
    loss = s;
    coef = 2.0f;
  } else {
    const float dist = std::sqrt(std::max(s, kEps));
    const float h = std::max(0.0f, margin - dist);
    loss = h * h;
    coef = h > 0.0f ? -2.0f * h / dist : 0.0f;
  }
  if (g1) {
    const float c = coef * scale;
    for (int64_t j = 0; j < d; ++j) g1[j] = c * (e1[j] - e2[j]);
  }
  return loss;
}
// The hot loops below are compiled twice (AVX2+FMA and the baseline) and
// picked at load time by the CPU (GCC's target_clones), like the library's GEMM.
#define MN_PS_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))

// y[0:n] += a * x[0:n], 8 lanes at a time with GCC vector extensions (one
// AVX2 FMA per 8 in the x86-64-v3 clones, two SSE ops in the baseline ones):
// the compiler's own vectorisation of these loops took a scalar path.
typedef float v8sf __attribute__((vector_size(32)));
__attribute__((always_inline)) inline void axpy(float* __restrict y, const float* __restrict x,
                                                float a, int64_t n) {
  const v8sf va = {a, a, a, a, a, a, a, a};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    v8sf vy, vx;
    std::memcpy(&vy, y + j, sizeof vy);
    std::memcpy(&vx, x + j, sizeof vx);
    vy += va * vx;
    std::memcpy(y + j, &vy, sizeof vy);
  }
  for (; j < n; ++j) y[j] += a * x[j];
}

// z (rows, N) += csr (rows, K) * W (K, N).
MN_PS_CLONES void sparse_times_dense(const int32_t* ptr, const int32_t* col, const float* val,
                                     int64_t rows, const float* __restrict W, int64_t N,
                                     float* __restrict z) {
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict zr = z + r * N;
    for (int32_t e = ptr[r]; e < ptr[r + 1]; ++e)
      axpy(zr, W + static_cast<int64_t>(col[e]) * N, val[e], N);
  }
}

// G (K, N) = csr^T (K, rows) * dz (rows, N); G is overwritten.
MN_PS_CLONES void sparse_t_times_dense(const int32_t* ptr, const int32_t* col, const float* val,
                                       int64_t rows, const float* __restrict dz, int64_t K,
                                       int64_t N, float* __restrict G) {
  std::memset(G, 0, static_cast<size_t>(K * N) * sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict d = dz + r * N;
    for (int32_t e = ptr[r]; e < ptr[r + 1]; ++e)
      axpy(G + static_cast<int64_t>(col[e]) * N, d, val[e], N);
  }
}

// Keras SGD with momentum: v = mu v - lr g; w += v.
MN_PS_CLONES void sgd_momentum(float* __restrict w, float* __restrict v, const float* __restrict g,
                               int64_t n, float lr, float mu) {
  for (int64_t i = 0; i < n; ++i) {
    v[i] = mu * v[i] - lr * g[i];
    w[i] += v[i];
  }
}

// Keras 1.2 RMSprop: a = rho a + (1 - rho) g^2; w -= lr g / (sqrt(a) + eps).
MN_PS_CLONES void rmsprop(float* __restrict w, float* __restrict a, const float* __restrict g, int64_t n,
                          float lr, float rho, float eps) {
  for (int64_t i = 0; i < n; ++i) {
    a[i] = rho * a[i] + (1.0f - rho) * g[i] * g[i];
    w[i] -= lr * g[i] / (std::sqrt(a[i]) + eps);
  }
}

// d loss / d z from d loss / d a: zero where the unit was off or dropped
// (a == 0), times the dropout scale s where it was kept.
MN_PS_CLONES void relu_dropout_backward(float* __restrict g, const float* __restrict a, int64_t n,
                                        float s) {
  for (int64_t i = 0; i < n; ++i) g[i] *= a[i] > 0.0f ? s : 0.0f;  // branch-free: vectorises
}

// z = max(z, 0) * keep; keep (n) holds 0 (dropped) or 1 / (1 - p) (kept).
MN_PS_CLONES void relu_dropout_forward(float* __restrict z, const float* __restrict keep, int64_t n) {
  for (int64_t i = 0; i < n; ++i) z[i] = std::max(z[i], 0.0f) * keep[i];
}

MN_PS_CLONES void relu_forward(float* __restrict z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) z[i] = std::max(z[i], 0.0f);
}

MN_PS_CLONES void add_bias_rows(float* __restrict z, const float* __restrict b, int64_t rows,
                                int64_t N) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < N; ++j) z[r * N + j] = b[j];
}

MN_PS_CLONES void column_sums(const float* __restrict g, int64_t rows, int64_t N,
                              float* __restrict out) {
  for (int64_t j = 0; j < N; ++j) out[j] = 0.0f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < N; ++j) out[j] += g[r * N + j];
}
}  // namespace

bool SiameseMlp::SparseRows::build(const float* x, int64_t rows, int64_t in) {
  if (static_cast<int64_t>(ptr.size()) < rows + 1) ptr.resize(static_cast<size_t>(rows + 1));
  const int64_t cap = static_cast<int64_t>(kSparseDensity * static_cast<double>(rows * in));
  if (static_cast<int64_t>(col.size()) < cap) {
    col.resize(static_cast<size_t>(cap));
    val.resize(static_cast<size_t>(cap));
  }
  int64_t nnz = 0;
  ptr[0] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * in;
    for (int64_t k = 0; k < in; ++k) {
      if (xr[k] == 0.0f) continue;
      if (nnz == cap) return false;
      col[nnz] = static_cast<int32_t>(k);
      val[nnz++] = xr[k];
    }
    ptr[r + 1] = static_cast<int32_t>(nnz);
  }
  return true;
}

SiameseMlp::SiameseMlp(const MlpConfig& cfg, uint64_t seed) : cfg_(cfg), seed_(seed) {
  MN_CHECK(!cfg.hidden.empty() && cfg.input > 0 && cfg.batch > 0, "pair_selection: MLP",
           "input ", cfg.input, ", ", cfg.hidden.size(), " layers, batch ", cfg.batch);
  MN_CHECK(cfg.dropout >= 0.0 && cfg.dropout < 1.0, "pair_selection: MLP", "dropout ",
           cfg.dropout, " is not in [0, 1)");
  dims_.push_back(cfg.input);
  for (int64_t h : cfg.hidden) {
    MN_CHECK(h > 0, "pair_selection: MLP", "layer width ", h);
    dims_.push_back(h);
  }
  MN_CHECK(cfg.eps > 0.0 && cfg.beta1 >= 0.0 && cfg.beta1 < 1.0 && cfg.beta2 >= 0.0 && cfg.beta2 < 1.0,
           "pair_selection: optimiser", "eps ", cfg.eps, ", beta1 ", cfg.beta1, ", beta2 ", cfg.beta2,
           " (need eps > 0 and betas in [0, 1))");
  const size_t L = cfg.hidden.size();
  const int64_t R = 2 * cfg.batch;
  Generator g(seed, 0);
  for (size_t l = 0; l < L; ++l) {
    const int64_t in = dims_[l], out = dims_[l + 1];
    // Glorot uniform (Keras): U(+-sqrt(6 / (in + out))), zero bias. PyTorch's
    // nn.Linear: kaiming_uniform_(a = sqrt 5) gives U(+-1 / sqrt(in)) for the
    // weights, and its bias is U(+-1 / sqrt(in)) too.
    const bool torch = cfg.init == Init::Torch;
    const double limit = torch ? 1.0 / std::sqrt(static_cast<double>(in))
                               : std::sqrt(6.0 / static_cast<double>(in + out));
    std::vector<float> w(static_cast<size_t>(in * out));
    for (float& v : w) v = static_cast<float>((2.0 * g.next_uniform() - 1.0) * limit);
    w_.push_back(std::move(w));
    b_.emplace_back(out, 0.0f);
    if (torch)
      for (float& v : b_.back()) v = static_cast<float>((2.0 * g.next_uniform() - 1.0) * limit);
    gw_.emplace_back(in * out, 0.0f);
    gb_.emplace_back(out, 0.0f);
    vw_.emplace_back(in * out, 0.0f);
    vb_.emplace_back(out, 0.0f);
    if (cfg.optimizer == Optimizer::Adam) {
      sw_.emplace_back(in * out, 0.0f);
      sb_.emplace_back(out, 0.0f);
    }
    a_.emplace_back(R * out, 0.0f);
    grad_.emplace_back(R * out, 0.0f);
    eval_a_.emplace_back(kEvalRows * out, 0.0f);
  }
  x_.assign(static_cast<size_t>(R * cfg.input), 0.0f);
  imp_.assign(static_cast<size_t>(cfg.batch), 0);
  keep_.assign(static_cast<size_t>(R * *std::max_element(dims_.begin() + 1, dims_.end())), 0.0f);
  // The batch's sparse rows hold at most 2 * batch dense rows.
  csr_.ptr.assign(static_cast<size_t>(R + 1), 0);
  csr_.col.assign(static_cast<size_t>(R * cfg.input), 0);
  csr_.val.assign(static_cast<size_t>(R * cfg.input), 0.0f);
  if (cfg.optimizer == Optimizer::Adam) {
    // The vectors are sized above and never reallocated: the plan keeps their pointers.
    std::vector<kernels::MultiTensorDesc> descs;
    for (size_t l = 0; l < L; ++l) {
      descs.push_back({w_[l].data(), gw_[l].data(), vw_[l].data(), sw_[l].data(),
                       static_cast<int64_t>(w_[l].size())});
      descs.push_back({b_[l].data(), gb_[l].data(), vb_[l].data(), sb_[l].data(),
                       static_cast<int64_t>(b_[l].size())});
    }
    adam_plan_.set(descs);
  }
  // Dropout draws use their own Philox key so they never overlap the init stream.
  seed_ = seed ^ 0x9E3779B97F4A7C15ull;
}

void SiameseMlp::forward(const float* in, const SparseRows* in_csr, int64_t rows, bool train,
                         std::vector<std::vector<float>>& acts) {
  const size_t L = w_.size();
  const float p = static_cast<float>(cfg_.dropout);
  const float scale = 1.0f / (1.0f - p);
  for (size_t l = 0; l < L; ++l) {
    const int64_t K = dims_[l], N = dims_[l + 1];
    float* z = acts[l].data();
    add_bias_rows(z, b_[l].data(), rows, N);
    if (l == 0 && in_csr)
      sparse_times_dense(in_csr->ptr.data(), in_csr->col.data(), in_csr->val.data(), rows,
                         w_[l].data(), N, z);
    else
      kernels::gemm_cpu<float>(false, false, rows, N, K, 1.0f, in, K, w_[l].data(), N, 1.0f, z, N);
    const int64_t n = rows * N;
    if (train && l + 1 < L && p > 0.0f) {
      // Inverted dropout from counter-based Philox, 4 decisions per block
      // (24-bit uniforms, as the library's bernoulli_); the mask first, then one
      // vectorised pass.
      float* keep = keep_.data();
      for (int64_t i = 0; i < n; i += 4) {
        const Philox4 u = philox4x32_10(seed_, rng_block_++);
        for (int64_t j = 0; j < 4 && i + j < n; ++j)
          keep[i + j] = philox_uniform_float(u.v[j]) >= p ? scale : 0.0f;
      }
      relu_dropout_forward(z, keep, n);
    } else {
      relu_forward(z, n);
    }
    in = z;
  }
}

double SiameseMlp::forward_backward(const float* left_rows, const float* right_rows,
                                    const uint8_t* impostor, int64_t nb, bool train) {
  MN_CHECK(nb > 0 && nb <= cfg_.batch, "pair_selection: MLP step", nb, " pairs for batch ",
           cfg_.batch);
  const int64_t in = cfg_.input;
  std::memcpy(x_.data(), left_rows, nb * in * sizeof(float));
  std::memcpy(x_.data() + nb * in, right_rows, nb * in * sizeof(float));
  const bool sparse = csr_.build(x_.data(), 2 * nb, in);
  return step(impostor, nb, train, sparse);
}

double SiameseMlp::step(const uint8_t* impostor, int64_t nb, bool train, bool sparse) {
  const int64_t rows = 2 * nb;
  forward(x_.data(), sparse ? &csr_ : nullptr, rows, train, a_);

  const size_t L = w_.size();
  const int64_t E = dims_[L];
  const float* emb = a_[L - 1].data();
  float* gemb = grad_[L - 1].data();
  double loss = 0.0;
  const float inv = 1.0f / static_cast<float>(nb);
  for (int64_t i = 0; i < nb; ++i) {
    float* g1 = gemb + i * E;
    float* g2 = gemb + (nb + i) * E;
    loss += contrastive_term(emb + i * E, emb + (nb + i) * E, E, impostor[i],
                             static_cast<float>(cfg_.margin), g1, inv);
    for (int64_t j = 0; j < E; ++j) g2[j] = -g1[j];
  }

  const float scale = train ? 1.0f / (1.0f - static_cast<float>(cfg_.dropout)) : 1.0f;
  for (size_t l = L; l-- > 0;) {
    const int64_t K = dims_[l], N = dims_[l + 1];
    float* g = grad_[l].data();
    const float* a = a_[l].data();
    // d loss / d z: zero where the unit was off (ReLU) or dropped; kept units
    // carry the dropout scale (no dropout after the last layer).
    relu_dropout_backward(g, a, rows * N, l + 1 < L ? scale : 1.0f);
    if (l == 0 && sparse) {
      sparse_t_times_dense(csr_.ptr.data(), csr_.col.data(), csr_.val.data(), rows, g, K, N,
                           gw_[l].data());
    } else {
      const float* lin = l == 0 ? x_.data() : a_[l - 1].data();
      kernels::gemm_cpu<float>(true, false, K, N, rows, 1.0f, lin, K, g, N, 0.0f, gw_[l].data(), N);
    }
    column_sums(g, rows, N, gb_[l].data());
    if (l > 0)
      kernels::gemm_cpu<float>(false, true, rows, K, N, 1.0f, g, N, w_[l].data(), N, 0.0f,
                               grad_[l - 1].data(), K);
  }
  return loss / nb;
}

void SiameseMlp::sgd_step() {
  const float lr = static_cast<float>(cfg_.lr), mu = static_cast<float>(cfg_.momentum);
  if (cfg_.optimizer == Optimizer::Adam) {
    // The library's fused Adam (nn::Adam's kernel), on this net's own buffers.
    kernels::AdamHyper h;
    h.lr = cfg_.lr;
    h.beta1 = cfg_.beta1;
    h.beta2 = cfg_.beta2;
    h.eps = cfg_.eps;
    h.step = ++adam_t_;
    kernels::adam_step_cpu<float>(adam_plan_.descs().data(), adam_plan_.chunks().data(),
                                  adam_plan_.num_chunks(), h);
    return;
  }
  if (cfg_.optimizer == Optimizer::RmsProp) {
    const float rho = static_cast<float>(cfg_.rho), eps = static_cast<float>(cfg_.eps);
    for (size_t l = 0; l < w_.size(); ++l) {
      rmsprop(w_[l].data(), vw_[l].data(), gw_[l].data(), static_cast<int64_t>(w_[l].size()), lr, rho, eps);
      rmsprop(b_[l].data(), vb_[l].data(), gb_[l].data(), static_cast<int64_t>(b_[l].size()), lr, rho, eps);
    }
    return;
  }
  for (size_t l = 0; l < w_.size(); ++l) {
    sgd_momentum(w_[l].data(), vw_[l].data(), gw_[l].data(), static_cast<int64_t>(w_[l].size()), lr, mu);
    sgd_momentum(b_[l].data(), vb_[l].data(), gb_[l].data(), static_cast<int64_t>(b_[l].size()), lr, mu);
  }
}

double SiameseMlp::train_epoch(const float* x, int64_t n, const std::vector<Pair>& pairs) {
  const int64_t in = cfg_.input, B = cfg_.batch, P = static_cast<int64_t>(pairs.size());
  // The inputs' sparse rows once per epoch (cheap next to 75 steps); a batch's
  // rows are then copied from it instead of scanning 784 values per row.
  const bool sparse = data_csr_.build(x, n, in);
  double total = 0.0;
  for (int64_t s = 0; s < P; s += B) {
    const int64_t nb = std::min(B, P - s);
    int64_t nnz = 0;
    csr_.ptr[0] = 0;
    for (int64_t r = 0; r < 2 * nb; ++r) {
      const Pair& p = pairs[s + r % nb];
      const int64_t src = r < nb ? p.a : p.b;  // left members, then right members
      MN_CHECK(src >= 0 && src < n, "pair_selection: MLP epoch", "pair member ", src,
               " outside the ", n, " inputs");
      if (r < nb) imp_[r] = p.impostor;
      if (sparse) {
        const int32_t b0 = data_csr_.ptr[src], b1 = data_csr_.ptr[src + 1];
        std::copy(data_csr_.col.begin() + b0, data_csr_.col.begin() + b1, csr_.col.begin() + nnz);
        std::copy(data_csr_.val.begin() + b0, data_csr_.val.begin() + b1, csr_.val.begin() + nnz);
        nnz += b1 - b0;
        csr_.ptr[r + 1] = static_cast<int32_t>(nnz);
      } else {
        std::memcpy(x_.data() + r * in, x + src * in, in * sizeof(float));
      }
    }
    total += step(imp_.data(), nb, true, sparse) * nb;
    sgd_step();
  }
  return P ? total / P : 0.0;
}

void SiameseMlp::embed(const float* x, int64_t n, float* out) {
  const size_t L = w_.size();
  const int64_t in = cfg_.input, E = dims_[L];
  for (int64_t s = 0; s < n; s += kEvalRows) {
    const int64_t rows = std::min(kEvalRows, n - s);
    const bool sparse = csr_.build(x + s * in, rows, in);
    forward(x + s * in, sparse ? &csr_ : nullptr, rows, false, eval_a_);
    std::memcpy(out + s * E, eval_a_[L - 1].data(), rows * E * sizeof(float));
  }
}

std::vector<float> SiameseMlp::pair_losses(const float* emb, const std::vector<Pair>& pairs) const {
  const int64_t E = dims_.back();
  std::vector<float> out(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i)
    out[i] = contrastive_term(emb + static_cast<int64_t>(pairs[i].a) * E,
                              emb + static_cast<int64_t>(pairs[i].b) * E, E, pairs[i].impostor,
                              static_cast<float>(cfg_.margin), nullptr, 1.0f);
  return out;
}

}  // namespace mn::pairsel
