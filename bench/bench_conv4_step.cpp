// One training iteration of the Omniglot CPU presets (omniglot_triplet
// --preset cpu-demo / cpu-hour): the conv4 trunk (4 x [conv 3x3 64, batch-norm,
// ReLU, max-pool 2]) on 28x28 inputs, a P x K batch of 32 x 4 = 128 images, the
// Multi-Similarity loss with its pair miner on cosine similarities (alpha 2,
// beta 50, base 0.5, epsilon 0.1), backward, Adam (lr 1e-3), zero_grad.
// Inputs are fixed random images in [0, 1] (data loading is not timed).
//
//   BM_Conv4StepCpu/128   MN_NUM_THREADS threads (2 on the shared machine),
//                         steady-clock manual time; images_per_s from the mean,
//                         best_images_per_s from the fastest iteration, and
//                         process CPU ms per step.
// Reference: bench/references/conv4_train_torch.py (the same iteration in PyTorch),
//   /usr/bin/python3 bench/references/conv4_train_torch.py --threads 2
//
//   BM_Conv4GridStepCpu/<loss>  one iteration of the Omniglot grid's CPU scales
//                         (omniglot_grid --scale cpu / paper-length): a batch of 50
//                         random triplets = 150 images through the same conv4 trunk
//                         with Koch's head (dense 128 + sigmoid), full sharing (one
//                         forward of the concatenated batch), the row's triplet loss
//                         (0 kumar, 1 schroff, 2 softmax ratio, 3 global, 4 global +
//                         triplet; the paper's parameters), backward, Adam lr 1e-4
//                         with the paper's L2 decays (conv 2e-4, dense 1e-3).
// Reference: bench/references/conv4_grid_torch.py --threads 2 (the same five steps).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <memory>

#include <time.h>

#include "kernels/multi_similarity.h"
#include "nn/models/conv4.h"
#include "nn/losses/losses.h"
#include "nn/models/triplet.h"
#include "nn/objective.h"
#include "nn/optim/optimizer.h"
#include "runtime/parallel.h"
#include "runtime/rng.h"

using namespace mn;

namespace {

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Conv4Step {
  std::unique_ptr<nn::TripletNet> net;
  std::unique_ptr<nn::Adam> opt;
  std::unique_ptr<nn::Objective> obj;
  Tensor x, labels;

  explicit Conv4Step(int64_t images) {
    Generator g(1);
    nn::Conv4Options o;  // 28x28, 64 channels, 4 blocks, batch-norm, no dense layer
    net = std::make_unique<nn::TripletNet>(std::make_shared<nn::Conv4>(o, g));
    nn::ParamGroup pg;
    pg.params = net->parameters();
    pg.lr = 1e-3;
    opt = std::make_unique<nn::Adam>(std::vector<nn::ParamGroup>{pg});
    obj = std::make_unique<nn::Objective>(nn::Objective::from_names("multi-similarity", "none"));
    x = Tensor::empty({images, 1, 28, 28}, DType::F32);
    Generator gx(11);
    uniform_(x, 0.0, 1.0, gx);
    std::vector<int64_t> lab;
    for (int64_t i = 0; i < images; ++i) lab.push_back(i / 4);  // P x K, K = 4
    labels = Tensor::from_vector(lab, {images});
  }
  double step() {
    nn::ObjectiveOutput out = (*obj)(net->embed_candidate(ag::Variable(x)), labels, nullptr);
    out.loss.backward();
    opt->step();
    opt->zero_grad();
    return out.loss.data().to_double_vector()[0];
  }
};

// The grid's step (omniglot_grid's cpu scales): 50 triplets, Koch's head, the row's loss.
constexpr kernels::TripletKind kGridLosses[] = {kernels::TripletKind::Kumar, kernels::TripletKind::Schroff,
                                                kernels::TripletKind::SoftmaxRatio, kernels::TripletKind::Global,
                                                kernels::TripletKind::GlobalTriplet};
constexpr const char* kGridLossNames[] = {"kumar", "schroff", "softmax", "global", "global-triplet"};

struct Conv4GridStep {
  std::unique_ptr<nn::TripletNet> net;
  std::unique_ptr<nn::Adam> opt;
  nn::TripletLossOptions lo;
  Tensor a, p, n;

  explicit Conv4GridStep(kernels::TripletKind kind, int64_t triplets = 50) {
    Generator g(1);
    nn::Conv4Options o;  // 28x28, 64 channels, 4 blocks, batch-norm
    o.embedding = 128;
    o.sigmoid_embedding = true;
    net = std::make_unique<nn::TripletNet>(std::make_shared<nn::Conv4>(o, g));
    nn::ParamGroup conv, dense;  // the paper's L2 decays, by parameter name
    conv.lr = dense.lr = 1e-4;
    conv.weight_decay = 2e-4;
    dense.weight_decay = 1e-3;
    for (const auto& [name, v] : net->named_parameters())
      (name.find("dense.") != std::string::npos ? dense : conv).params.push_back(v);
    opt = std::make_unique<nn::Adam>(std::vector<nn::ParamGroup>{conv, dense});
    lo.kind = kind;
    lo.margin = 0.01;
    Generator gx(11);
    for (Tensor* t : {&a, &p, &n}) {
      *t = Tensor::empty({triplets, 1, 28, 28}, DType::F32);
      uniform_(*t, 0.0, 1.0, gx);
    }
  }
  double step() {
    auto e = net->embed_triplets(ag::Variable(a), ag::Variable(p), ag::Variable(n));
    nn::LossOutput out = nn::triplet_loss(e[0], e[1], e[2], lo);
    out.loss.backward();
    opt->step();
    opt->zero_grad();
    return out.loss.data().to_double_vector()[0];
  }
};

template <class Step>
void time_steps(benchmark::State& st, Step& s, double images) {
  const double first = s.step();
  if (!std::isfinite(first)) {
    st.SkipWithError("non-finite loss");
    return;
  }
  s.step();  // warm-up
  double total_s = 0, best_s = 1e30, cpu_s = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    s.step();
    cpu_s += process_cpu_seconds() - c0;
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    st.SetIterationTime(sec);
    total_s += sec;
    best_s = std::min(best_s, sec);
  }
  st.counters["images_per_s"] = images * static_cast<double>(st.iterations()) / total_s;
  st.counters["best_images_per_s"] = images / best_s;
  st.counters["threads"] = num_threads();
  st.counters["cpu_ms_per_step"] = 1e3 * cpu_s / static_cast<double>(st.iterations());
}

void BM_Conv4StepCpu(benchmark::State& st) {
  Conv4Step s(st.range(0));
  time_steps(st, s, static_cast<double>(st.range(0)));
  st.SetLabel("cpu, float32, conv4 28x28, multi-similarity, Adam");
}

void BM_Conv4GridStepCpu(benchmark::State& st) {
  Conv4GridStep s(kGridLosses[st.range(0)]);
  time_steps(st, s, 150.0);
  st.SetLabel(std::string("cpu, float32, conv4 28x28 + dense 128 sigmoid, 50 triplets, ") +
              kGridLossNames[st.range(0)] + ", Adam");
}

}  // namespace

BENCHMARK(BM_Conv4GridStepCpu)->DenseRange(0, 4)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(3.0);
BENCHMARK(BM_Conv4StepCpu)->Arg(128)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(5.0);

BENCHMARK_MAIN();
