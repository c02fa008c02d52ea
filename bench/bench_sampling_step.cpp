// One training step of the sampling study's net (experiments/sampling/):
// Bielski's EmbeddingNet (conv 1->32 5x5, PReLU, pool, conv 32->64 5x5, PReLU,
// pool, dense 1024->256->256->2 with PReLUs) on 28x28 inputs, loss, backward,
// Adam (lr 1e-3), zero_grad. Inputs are fixed random images (data loading is
// not timed).
//
//   BM_SamplingStep/0   Random Offline Pair: 128 pairs = 256 images, the
//                       contrastive loss y D + (1 - y) max(0, 1 - D)
//   BM_SamplingStep/1   All Positive Online Pair: a 9 x 25 = 225-image batch,
//                       all 2,700 positive pairs + 2,700 random negatives mined
//                       on squared distances, the same contrastive loss
//   BM_SamplingStep/2   All Positive Online Triplet: 225 images, all 540,000
//                       triplets (unordered anchor-positive pairs x negatives),
//                       max(0, d_ap - d_an + 1) on plain L2 by the fused batch-all
//                       loss (kernels/batch_all.h), weight decay 1e-4
// MN_NUM_THREADS threads (2 on the shared machine), steady-clock manual time;
// images_per_s from the mean, best_images_per_s from the fastest iteration.
// Reference: bench/references/sampling_train_torch.py (the same steps in PyTorch),
//   /usr/bin/python3 bench/references/sampling_train_torch.py --threads 2
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <memory>

#include "kernels/miners.h"
#include "nn/losses/loss.h"
#include "nn/losses/losses.h"
#include "nn/models/embedding_net.h"
#include "nn/optim/optimizer.h"
#include "runtime/parallel.h"
#include "runtime/rng.h"

using namespace mn;

namespace {

struct SamplingStep {
  int kind;
  std::unique_ptr<nn::EmbeddingNet> net;
  std::unique_ptr<nn::Adam> opt;
  Tensor x, labels, pairs, same;
  Generator mine_gen{5};
  std::shared_ptr<nn::Loss> batch_all;

  explicit SamplingStep(int k) : kind(k) {
    Generator g(1);
    net = std::make_unique<nn::EmbeddingNet>(nn::EmbeddingNetOptions{}, g);
    opt = std::make_unique<nn::Adam>(net->parameters(), 1e-3, kind == 2 ? 1e-4 : 0.0);
    const int64_t n = kind == 0 ? 256 : 225;
    x = Tensor::empty({n, 1, 28, 28}, DType::F32);
    Generator gx(11);
    normal_(x, 0.0, 1.0, gx);
    std::vector<int64_t> lab, pr, sm;
    for (int64_t i = 0; i < n; ++i) lab.push_back(i / 25);  // 9 x 25 (online)
    labels = Tensor::from_vector(lab, {n});
    for (int64_t i = 0; i < 128; ++i) {
      pr.insert(pr.end(), {i, 128 + i});
      sm.push_back(i % 2);
    }
    pairs = Tensor::from_vector(pr, {128, 2});
    same = Tensor::from_vector(sm, {128});
    nn::LossConfig lc;
    lc.margin = 1.0;
    lc.unordered_positives = true;
    batch_all = nn::make_loss("batch-all", lc);
  }
  double step() {
    ag::Variable e = net->forward(ag::Variable(x));
    nn::LossOutput out;
    if (kind == 0) {
      nn::ContrastiveOptions co;
      co.form = nn::ContrastiveForm::Sampling;
      out = nn::contrastive_loss(e, pairs, same, co);
    } else {
      Tensor dist = kernels::pairwise_distance_matrix(e.data(), true);
      if (kind == 1) {
        kernels::MinedPairs m = kernels::mine_pairs(dist, labels, kernels::PairNegatives::Random, &mine_gen);
        nn::ContrastiveOptions co;
        co.form = nn::ContrastiveForm::Sampling;
        out = nn::contrastive_loss(e, m.pairs, m.is_pos, co);
      } else {
        // As the study: the fused batch-all loss on the distance matrix (no triplet list).
        out = batch_all->compute(e, labels, nn::Mined{});
      }
    }
    out.loss.backward();
    opt->step();
    opt->zero_grad();
    return out.loss.data().to_double_vector()[0];
  }
};

void BM_SamplingStep(benchmark::State& st) {
  SamplingStep s(static_cast<int>(st.range(0)));
  if (!std::isfinite(s.step())) {
    st.SkipWithError("non-finite loss");
    return;
  }
  s.step();  // warm-up
  double total_s = 0, best_s = 1e30;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    s.step();
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    st.SetIterationTime(sec);
    total_s += sec;
    best_s = std::min(best_s, sec);
  }
  const double n = static_cast<double>(s.x.size(0));
  st.counters["images_per_s"] = n * static_cast<double>(st.iterations()) / total_s;
  st.counters["best_images_per_s"] = n / best_s;
  st.counters["threads"] = num_threads();
  static const char* kLabels[] = {"random offline pair, 128 pairs", "all-positive online pair, 9x25",
                                  "all-positive online triplet, 9x25, 540,000 triplets"};
  st.SetLabel(kLabels[st.range(0)]);
}

}  // namespace

BENCHMARK(BM_SamplingStep)->Arg(0)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(5.0);

BENCHMARK_MAIN();
