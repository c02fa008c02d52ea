// The study's fused siamese MLP; see siamese_mlp.h.
#include "experiments/pair_selection/siamese_mlp.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/gemm.h"
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
}  // namespace

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
  const size_t L = cfg.hidden.size();
  const int64_t R = 2 * cfg.batch;
  Generator g(seed, 0);
  for (size_t l = 0; l < L; ++l) {
    const int64_t in = dims_[l], out = dims_[l + 1];
    const double limit = std::sqrt(6.0 / static_cast<double>(in + out));  // Glorot uniform
    std::vector<float> w(static_cast<size_t>(in * out));
    for (float& v : w) v = static_cast<float>((2.0 * g.next_uniform() - 1.0) * limit);
    w_.push_back(std::move(w));
    b_.emplace_back(out, 0.0f);
    gw_.emplace_back(in * out, 0.0f);
    gb_.emplace_back(out, 0.0f);
    vw_.emplace_back(in * out, 0.0f);
    vb_.emplace_back(out, 0.0f);
    a_.emplace_back(R * out, 0.0f);
    grad_.emplace_back(R * out, 0.0f);
    eval_a_.emplace_back(kEvalRows * out, 0.0f);
  }
  x_.assign(static_cast<size_t>(R * cfg.input), 0.0f);
  left_.assign(static_cast<size_t>(cfg.batch * cfg.input), 0.0f);
  right_.assign(static_cast<size_t>(cfg.batch * cfg.input), 0.0f);
  imp_.assign(static_cast<size_t>(cfg.batch), 0);
  // Dropout draws use their own Philox key so they never overlap the init stream.
  seed_ = seed ^ 0x9E3779B97F4A7C15ull;
}

void SiameseMlp::forward(const float* in, int64_t rows, bool train,
                         std::vector<std::vector<float>>& acts) {
  const size_t L = w_.size();
  const float p = static_cast<float>(cfg_.dropout);
  const float scale = 1.0f / (1.0f - p);
  for (size_t l = 0; l < L; ++l) {
    const int64_t K = dims_[l], N = dims_[l + 1];
    float* z = acts[l].data();
    for (int64_t r = 0; r < rows; ++r) std::memcpy(z + r * N, b_[l].data(), N * sizeof(float));
    kernels::gemm_cpu<float>(false, false, rows, N, K, 1.0f, in, K, w_[l].data(), N, 1.0f, z, N);
    const int64_t n = rows * N;
    if (train && l + 1 < L && p > 0.0f) {
      // Inverted dropout from counter-based Philox: 4 decisions per block.
      for (int64_t i = 0; i < n; i += 4) {
        const Philox4 u = philox4x32_10(seed_, rng_block_++);
        for (int64_t j = 0; j < 4 && i + j < n; ++j) {
          const bool keep = philox_uniform_float(u.v[j]) >= p;
          const float v = z[i + j] > 0.0f ? z[i + j] : 0.0f;
          z[i + j] = keep ? v * scale : 0.0f;
        }
      }
    } else {
      for (int64_t i = 0; i < n; ++i) z[i] = z[i] > 0.0f ? z[i] : 0.0f;
    }
    in = z;
  }
}

double SiameseMlp::forward_backward(const float* left_rows, const float* right_rows,
                                    const uint8_t* impostor, int64_t nb, bool train) {
  MN_CHECK(nb > 0 && nb <= cfg_.batch, "pair_selection: MLP step", nb, " pairs for batch ",
           cfg_.batch);
  const int64_t in = cfg_.input, rows = 2 * nb;
  std::memcpy(x_.data(), left_rows, nb * in * sizeof(float));
  std::memcpy(x_.data() + nb * in, right_rows, nb * in * sizeof(float));
  forward(x_.data(), rows, train, a_);

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
    const float s = l + 1 < L ? scale : 1.0f;
    for (int64_t i = 0; i < rows * N; ++i) g[i] = a[i] > 0.0f ? g[i] * s : 0.0f;
    const float* lin = l == 0 ? x_.data() : a_[l - 1].data();
    kernels::gemm_cpu<float>(true, false, K, N, rows, 1.0f, lin, K, g, N, 0.0f, gw_[l].data(), N);
    float* gb = gb_[l].data();
    std::fill(gb, gb + N, 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < N; ++j) gb[j] += g[r * N + j];
    if (l > 0)
      kernels::gemm_cpu<float>(false, true, rows, K, N, 1.0f, g, N, w_[l].data(), N, 0.0f,
                               grad_[l - 1].data(), K);
  }
  return loss / nb;
}

void SiameseMlp::sgd_step() {
  const float lr = static_cast<float>(cfg_.lr), mu = static_cast<float>(cfg_.momentum);
  auto upd = [&](std::vector<float>& w, const std::vector<float>& g, std::vector<float>& v) {
    float* wp = w.data();
    float* vp = v.data();
    const float* gp = g.data();
    const size_t n = w.size();
    for (size_t i = 0; i < n; ++i) {
      vp[i] = mu * vp[i] - lr * gp[i];
      wp[i] += vp[i];
    }
  };
  for (size_t l = 0; l < w_.size(); ++l) {
    upd(w_[l], gw_[l], vw_[l]);
    upd(b_[l], gb_[l], vb_[l]);
  }
}

double SiameseMlp::train_epoch(const float* x, const std::vector<Pair>& pairs) {
  const int64_t in = cfg_.input, B = cfg_.batch, P = static_cast<int64_t>(pairs.size());
  std::vector<float>& left = left_;
  std::vector<float>& right = right_;
  std::vector<uint8_t>& imp = imp_;
  double total = 0.0;
  for (int64_t s = 0; s < P; s += B) {
    const int64_t nb = std::min(B, P - s);
    for (int64_t i = 0; i < nb; ++i) {
      const Pair& p = pairs[s + i];
      std::memcpy(left.data() + i * in, x + static_cast<int64_t>(p.a) * in, in * sizeof(float));
      std::memcpy(right.data() + i * in, x + static_cast<int64_t>(p.b) * in, in * sizeof(float));
      imp[i] = p.impostor;
    }
    total += forward_backward(left.data(), right.data(), imp.data(), nb, true) * nb;
    sgd_step();
  }
  return P ? total / P : 0.0;
}

void SiameseMlp::embed(const float* x, int64_t n, float* out) {
  const size_t L = w_.size();
  const int64_t in = cfg_.input, E = dims_[L];
  for (int64_t s = 0; s < n; s += kEvalRows) {
    const int64_t rows = std::min(kEvalRows, n - s);
    forward(x + s * in, rows, false, eval_a_);
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
