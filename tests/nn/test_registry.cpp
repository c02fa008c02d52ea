// The name registry (nn/registry.h): unknown names list the valid ones, every
// registered name constructs, duplicates are refused, help lists the names.
#include <gtest/gtest.h>

#include "nn/layers/linear.h"
#include "nn/losses/loss.h"
#include "nn/miners/miner.h"
#include "nn/registry.h"
#include "tests/common/test_util.h"

using namespace mn;
using namespace mn::nn;

namespace {
// The message of the mn::Error thrown by f (empty when none was thrown).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

template <typename F>
void expect_unknown_lists_names(const Registry<F>& r) {
  std::string msg = error_of([&] { r.get("no-such-name"); });
  ASSERT_FALSE(msg.empty()) << r.what() << ": unknown name did not throw";
  EXPECT_NE(msg.find("no-such-name"), std::string::npos) << msg;
  for (const std::string& n : r.names()) EXPECT_NE(msg.find(n), std::string::npos) << n << " missing in: " << msg;
  for (const std::string& n : r.names()) EXPECT_NE(r.help().find(n), std::string::npos) << n;
}
}  // namespace

TEST(Registry, GenericTemplate) {
  // E.g. a sampler registry in data/: any factory type works.
  Registry<std::function<int(int)>> r("sampler");
  r.add("double", "twice", [](int x) { return 2 * x; }).add("square", "x^2", [](int x) { return x * x; });
  EXPECT_TRUE(r.contains("double"));
  EXPECT_FALSE(r.contains("triple"));
  EXPECT_EQ(r.get("square")(5), 25);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"double", "square"}));
  EXPECT_EQ(r.help("double"), "twice");
  EXPECT_THROW(r.add("double", "again", [](int x) { return x; }), Error);
  EXPECT_THROW(r.add("", "empty", [](int x) { return x; }), Error);
  std::string msg = error_of([&] { r.get("triple"); });
  EXPECT_NE(msg.find("unknown sampler 'triple'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("double, square"), std::string::npos) << msg;
}

TEST(Registry, EveryLossConstructs) {
  auto& r = loss_registry();
  for (const char* n : {"schroff", "kumar", "margin-l2", "soft-margin", "softmax", "global", "global-triplet",
                        "contrastive-hadsell", "contrastive-sampling", "koch-siamese", "lmnn",
                        "multi-similarity"})
    EXPECT_TRUE(r.contains(n)) << n;
  Generator g(3);
  Linear head(4, 1, g);
  LossConfig c;
  c.head_weight = head.weight();
  c.head_bias = head.bias();
  c.lmnn_metric = ag::Variable(Tensor::ones({4, 3}, DType::F32), true);
  for (const std::string& n : r.names()) {
    SCOPED_TRACE(n);
    std::shared_ptr<Loss> l = make_loss(n, c);
    ASSERT_TRUE(l != nullptr);
    EXPECT_EQ(l->name(), n);
  }
  // Losses that need model parts say so.
  EXPECT_NE(error_of([] { make_loss("koch-siamese"); }).find("head_weight"), std::string::npos);
  EXPECT_NE(error_of([] { make_loss("lmnn"); }).find("lmnn_metric"), std::string::npos);
  expect_unknown_lists_names(r);
}

TEST(Registry, EveryMinerConstructs) {
  auto& r = miner_registry();
  for (const char* n : {"all-triplets", "batch-hard", "semi-hard", "random-violating", "pairs-random",
                        "pairs-hard-negative", "all-pairs", "k-bh", "k-ns", "none"})
    EXPECT_TRUE(r.contains(n)) << n;
  for (const std::string& n : r.names()) {
    SCOPED_TRACE(n);
    auto m = make_miner(n);
    ASSERT_TRUE(m != nullptr);
    EXPECT_EQ(m->name(), n);
  }
  expect_unknown_lists_names(r);
}

TEST(Registry, EveryActivationConstructs) {
  auto& r = activation_registry();
  const std::vector<std::pair<std::string, kernels::Act>> want = {
      {"relu", kernels::Act::ReLU},         {"elu", kernels::Act::ELU},
      {"selu", kernels::Act::SELU},         {"softplus", kernels::Act::Softplus},
      {"sigmoid", kernels::Act::Sigmoid},   {"tanh", kernels::Act::Tanh}};
  EXPECT_EQ(r.size(), want.size());
  for (auto& [n, k] : want) {
    auto a = r.get(n)(kernels::ActParams{});
    ASSERT_TRUE(a != nullptr) << n;
    EXPECT_EQ(a->kind(), k) << n;
    EXPECT_EQ(activation_kind(n), k) << n;
  }
  // Parameters reach the module: ELU(alpha = 2) at -1 is 2 (e^-1 - 1).
  kernels::ActParams p;
  p.alpha = 2.0;
  auto elu = r.get("elu")(p);
  double y = elu->forward(ag::Variable(Tensor::full({1}, -1.0, DType::F64))).data().item();
  EXPECT_NEAR(y, 2.0 * (std::exp(-1.0) - 1.0), 1e-15);
  expect_unknown_lists_names(r);
}

TEST(Registry, EveryOptimizerAndScheduleConstructs) {
  auto& ro = optimizer_registry();
  auto& rs = schedule_registry();
  EXPECT_EQ(ro.names(), (std::vector<std::string>{"sgd", "adam", "adamw"}));
  EXPECT_EQ(rs.names(), (std::vector<std::string>{"constant", "exponential", "step", "cosine"}));
  for (const std::string& n : ro.names()) {
    SCOPED_TRACE(n);
    ParamGroup pg;
    pg.params = {ag::Variable(Tensor::ones({3}, DType::F64), true)};
    pg.lr = 0.5;
    auto opt = ro.get(n)({pg});
    ASSERT_TRUE(opt != nullptr);
    ScheduleConfig sc;
    sc.gamma = 0.5;
    sc.step_epochs = 2;
    sc.total_epochs = 6;  // cosine: epoch 3 of 6 is half way, (1 + cos(pi / 2)) / 2 = 1/2
    for (const std::string& s : rs.names()) {
      auto sched = rs.get(s)(*opt, sc);
      sched->apply(3);
      const double want = s == "constant" ? 0.5 : s == "exponential" ? 0.5 * 0.125 : 0.5 * 0.5;
      EXPECT_DOUBLE_EQ(opt->group(0).lr, want) << s;
      sched->apply(0);
    }
  }
  expect_unknown_lists_names(ro);
  expect_unknown_lists_names(rs);
}
