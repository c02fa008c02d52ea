// The step audit and CUDA graph capture (runtime/graph.h). On the CPU: the
// audit records the first graph-unsafe operation (host reads, tensors made from
// host data, random draws) and lets the work run; eager mode ignores them. On a
// GPU: a captured sequence of copies and fills replays with the inputs' new
// values, allocations made while capturing keep their addresses, and an unsafe
// operation inside a capture fails it with the operation's name.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/graph.h"
#include "runtime/rng.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

TEST(StepAudit, RecordsTheFirstUnsafeOperationAndLetsItRun) {
  Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  {
    StepAudit audit;
    EXPECT_TRUE(audit.reason().empty());
    Tensor u = t.to(DType::F64);  // device work only: nothing to record
    EXPECT_TRUE(audit.reason().empty());
    EXPECT_EQ(u.to_vector<double>(), (std::vector<double>{1, 2, 3}));  // runs, and is recorded
    EXPECT_EQ(audit.reason(), "a host read of tensor values");
    Generator g(1);
    g.advance(1);  // a later one does not replace the first
    EXPECT_EQ(audit.reason(), "a host read of tensor values");
  }
  EXPECT_EQ(step_mode(), StepMode::Eager);
  {
    StepAudit audit;
    Generator g(1);
    g.next_u32();
    EXPECT_NE(audit.reason().find("a random draw"), std::string::npos) << audit.reason();
  }
  {
    StepAudit audit;
    (void)Tensor::from_vector(std::vector<int64_t>{4}, {1});
    EXPECT_NE(audit.reason().find("made from host data"), std::string::npos) << audit.reason();
  }
  graph_unsafe("ignored in eager mode");  // no throw, nothing recorded
}

TEST(CudaGraph, RefusesTheCpu) {
  EXPECT_THROW({ cuda::Graph g{Device::cpu()}; }, Error);
}

TEST(CudaGraph, ReplaysCopiesWithNewInputs) {
  MN_SKIP_IF_NO_CUDA();
  const Device dev = Device::cuda(0);
  Tensor in = Tensor::zeros({1000}, DType::F32, dev), out;
  cuda::Graph g(dev);
  // Made while capturing: from the graph's pool; its address stays valid for the replays.
  const std::string why = g.capture([&] { out = in.to(DType::F64); });
  ASSERT_EQ(why, "");
  ASSERT_TRUE(g.ready());
  for (int k = 1; k <= 3; ++k) {
    in.fill_(static_cast<double>(k));
    g.replay();
    const auto v = out.to_vector<double>();
    EXPECT_EQ(v.front(), k);
    EXPECT_EQ(v.back(), k);
  }
  EXPECT_GE(cuda::graph_stats().replays, 3u);
}

TEST(CudaGraph, AnUnsafeOperationFailsTheCaptureNamingIt) {
  MN_SKIP_IF_NO_CUDA();
  const Device dev = Device::cuda(0);
  Tensor in = Tensor::zeros({10}, DType::F32, dev);
  cuda::Graph g(dev);
  const std::string why = g.capture([&] { (void)in.to_vector<float>(); });
  EXPECT_NE(why.find("a host read of tensor values"), std::string::npos) << why;
  EXPECT_FALSE(g.ready());
  // The device is usable afterwards (the failed capture left no error behind).
  in.fill_(2.0);
  EXPECT_EQ(in.to_vector<float>()[9], 2.0f);
}

TEST(CudaGraph, ReplayHooksRunAtEachReplayNotAtTheCapture) {
  MN_SKIP_IF_NO_CUDA();
  const Device dev = Device::cuda(0);
  Tensor in = Tensor::zeros({10}, DType::F32, dev);
  int counted = 0;
  cuda::on_replay([&] { ++counted; });  // outside a capture: ignored
  cuda::Graph g(dev);
  ASSERT_EQ(g.capture([&] {
    in.fill_(7.0);
    cuda::on_replay([&] { ++counted; });
  }), "");
  EXPECT_EQ(counted, 0);
  for (int k = 1; k <= 3; ++k) {
    in.zero_();
    g.replay();
    EXPECT_EQ(counted, k);
    EXPECT_EQ(in.to_vector<float>()[0], 7.0f);
  }
  // A failed capture keeps none of its hooks.
  const std::string why = g.capture([&] {
    cuda::on_replay([&] { counted += 100; });
    (void)in.to_vector<float>();
  });
  EXPECT_NE(why, "");
  EXPECT_FALSE(g.ready());
  EXPECT_EQ(counted, 3);
}

}  // namespace
}  // namespace mn
