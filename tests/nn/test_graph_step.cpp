// A training step of the Omniglot study's Koch triplet net as a CUDA graph
// (runtime/graph.h): two eager steps, then the third captured and replayed for
// steps 3-6, against six eager steps from the same seed and the same inputs
// (fixed input tensors refilled before each step, as StepInputs does): the
// weights, the optimizer's step count and the last loss must be bit-identical
// (the same kernels in the same order), for SGD with momentum and for Adam (its
// step count advanced on the device), also with every allocation poisoned. The
// audit of the step must be clean. GPU only: on the CPU the audit part runs (the
// step has nothing a graph cannot replay), and the poisoned run.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/gemm_config.h"
#include "nn/losses/losses.h"
#include "nn/models/koch.h"
#include "nn/optim/optimizer.h"
#include "runtime/graph.h"
#include "runtime/rng.h"
#include "tests/common/test_util.h"

using namespace mn;

namespace {

struct StepRun {
  std::vector<Tensor> weights;  // CPU copies after the last step
  double last_loss = 0;
  double step_count = 0;
  std::string audit;
};

StepRun run(Device dev, bool adam, int steps, bool graph) {
  kernels::Tf32Scope fp32(false);
  nn::KochBranchOptions o;
  o.width = 0.25;  // a quarter of the study's channels: the same layers, faster
  o.embedding = 256;
  Generator g(7);
  nn::TripletNet net(o, nn::TripletShare::Full, g);
  net.to(dev);
  std::unique_ptr<nn::Optimizer> opt;
  if (adam) opt = std::make_unique<nn::Adam>(net.param_groups(1e-4, 2e-4, 1e-3));
  else opt = std::make_unique<nn::SGD>(net.parameters(), 1e-3, 0.9);
  nn::TripletLossOptions lo;
  lo.kind = nn::TripletKind::Global;
  const int64_t B = 4;
  Tensor in[3];
  for (Tensor& t : in) t = Tensor::zeros({B, 1, 105, 105}, DType::F32, dev);
  Generator gx(11);
  Tensor stats;
  auto compute = [&] {
    auto e = net.embed_triplets(ag::Variable(in[0]), ag::Variable(in[1]), ag::Variable(in[2]));
    nn::LossOutput out = nn::triplet_loss(e[0], e[1], e[2], lo);
    out.loss.backward();
    opt->step();
    opt->zero_grad();
    stats = out.stats;
  };
  StepRun r;
  std::unique_ptr<cuda::Graph> cg;
  for (int s = 0; s < steps; ++s) {
    for (Tensor& t : in) {  // the next batch, into the same tensors
      Tensor h = Tensor::empty({B, 1, 105, 105});
      uniform_(h, 0.0, 255.0, gx);
      t.copy_(h.to(dev));
    }
    if (s == 2) {
      StepAudit audit;
      if (!graph || !dev.is_cuda()) {
        compute();
        r.audit = audit.reason();
        continue;
      }
    }
    if (!graph || s < 2) {
      compute();
      continue;
    }
    if (!cg) {
      cg = std::make_unique<cuda::Graph>(dev);
      const std::string why = cg->capture(compute);
      EXPECT_EQ(why, "");
    }
    cg->replay();
  }
  for (const ag::Variable& v : net.parameters()) r.weights.push_back(v.data().to(Device::cpu()).clone());
  r.last_loss = stats.narrow(0, 0, 1).item();
  for (const auto& [name, t] : opt->state_dict())
    if (name.find(".step") != std::string::npos) r.step_count = t.item();
  return r;
}

void expect_identical(const StepRun& a, const StepRun& b) {
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) {
    ASSERT_EQ(a.weights[i].nbytes(), b.weights[i].nbytes());
    EXPECT_EQ(std::memcmp(a.weights[i].raw_data(), b.weights[i].raw_data(), a.weights[i].nbytes()), 0)
        << "parameter " << i;
  }
  EXPECT_EQ(a.last_loss, b.last_loss);
  EXPECT_EQ(a.step_count, b.step_count);
}

TEST(GraphStep, KochStepAuditsCleanOnTheCpu) {
  for (bool adam : {false, true}) {
    SCOPED_TRACE(adam ? "Adam" : "SGD with momentum");
    StepRun r = run(Device::cpu(), adam, 3, false);
    EXPECT_EQ(r.audit, "");
    StepRun poisoned;
    {
      test::PoisonScope poison(true);
      poisoned = run(Device::cpu(), adam, 3, false);
    }
    expect_identical(r, poisoned);
  }
}

TEST(GraphStep, CudaKochStepReplayedEqualsEagerBitForBit) {
  MN_SKIP_IF_NO_CUDA();
  for (bool adam : {false, true}) {
    SCOPED_TRACE(adam ? "Adam" : "SGD with momentum");
    const StepRun eager = run(Device::cuda(0), adam, 6, false);
    EXPECT_EQ(eager.audit, "");
    const StepRun graph = run(Device::cuda(0), adam, 6, true);
    expect_identical(eager, graph);
    EXPECT_EQ(graph.step_count, 6.0);
    // With every allocation poisoned (NaN bytes; also the graph's own blocks, each
    // replay) nothing changes: the replayed step reads no memory it did not write.
    StepRun poisoned;
    {
      test::PoisonScope poison(true);
      poisoned = run(Device::cuda(0), adam, 6, true);
    }
    expect_identical(eager, poisoned);
  }
}

}  // namespace
