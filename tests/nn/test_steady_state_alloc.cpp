// The CPU training step of the Omniglot CPU presets (conv4 trunk, P x K batch,
// Multi-Similarity loss, Adam) reaches a steady state in which every large
// buffer (>= 1 MiB: activations, im2col panels, gradients) comes from the
// block cache: after two warm-up steps, further steps make no cache miss, and
// the cache does not grow. (Small tensors go to the C library's allocator.)
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "nn/models/conv4.h"
#include "nn/models/triplet.h"
#include "nn/objective.h"
#include "nn/optim/optimizer.h"
#include "runtime/allocator.h"
#include "runtime/rng.h"

using namespace mn;

TEST(SteadyState, Conv4StepServesLargeBuffersFromTheCache) {
  if (cpu_cache_limit() == 0) GTEST_SKIP() << "the CPU block cache is off (MN_CPU_CACHE_MB=0)";
  Generator g(1);
  nn::Conv4Options o;
  o.embedding = 128;
  nn::TripletNet net(std::make_shared<nn::Conv4>(o, g));
  nn::ParamGroup pg;
  pg.params = net.parameters();
  nn::Adam opt(std::vector<nn::ParamGroup>{pg});
  nn::Objective obj = nn::Objective::from_names("multi-similarity", "none");
  const int64_t n = 64;
  Tensor x = Tensor::empty({n, 1, 28, 28});
  Generator gx(2);
  uniform_(x, 0.0, 1.0, gx);
  std::vector<int64_t> lab;
  for (int64_t i = 0; i < n; ++i) lab.push_back(i / 8);
  Tensor labels = Tensor::from_vector(lab, {n});
  auto step = [&] {
    nn::ObjectiveOutput out = obj(net.embed_candidate(ag::Variable(x)), labels, nullptr);
    out.loss.backward();
    opt.step();
    opt.zero_grad();
  };
  step();
  step();
  const CpuAllocatorStats before = cpu_allocator_stats();
  for (int i = 0; i < 3; ++i) step();
  const CpuAllocatorStats after = cpu_allocator_stats();
  ASSERT_GT(after.requests, before.requests) << "the step allocates no large buffer: the test measures nothing";
  EXPECT_EQ(after.requests - before.requests, after.cache_hits - before.cache_hits)
      << "large allocations missed the cache in the steady state: " << after.str();
  EXPECT_EQ(after.returned_to_os, before.returned_to_os) << after.str();
  EXPECT_LE(after.peak_bytes_cached, before.peak_bytes_cached + (1u << 20)) << "the cache grew: " << after.str();
}
