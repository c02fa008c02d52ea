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
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <memory>

#include <time.h>

#include "kernels/multi_similarity.h"
#include "nn/models/conv4.h"
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

void BM_Conv4StepCpu(benchmark::State& st) {
  Conv4Step s(st.range(0));
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
  const double n = static_cast<double>(st.range(0));
  st.counters["images_per_s"] = n * static_cast<double>(st.iterations()) / total_s;
  st.counters["best_images_per_s"] = n / best_s;
  st.counters["threads"] = num_threads();
  st.counters["cpu_ms_per_step"] = 1e3 * cpu_s / static_cast<double>(st.iterations());
  st.SetLabel("cpu, float32, conv4 28x28, multi-similarity, Adam");
}

}  // namespace

BENCHMARK(BM_Conv4StepCpu)->Arg(128)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(5.0);

BENCHMARK_MAIN();
