// Generic siamese / triplet nets (nn/models/siamese.h, triplet.h) over an MLP
// trunk (nn/models/mlp.h): float64 gradchecks, shared vs disjoint weights, the
// Koch constructors' names and initial draws, and optimizer groups by prefix.
#include <gtest/gtest.h>

#include <set>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/models/koch.h"
#include "nn/init.h"
#include "nn/models/conv4.h"
#include "nn/models/mlp.h"
#include "nn/optim/param_groups.h"
#include "tests/common/test_util.h"

using namespace mn;
using namespace mn::nn;

namespace {

MLPOptions small_mlp(double dropout = 0.0) {
  MLPOptions o;
  o.sizes = {6, 5, 4, 3};
  o.dropout = dropout;
  o.activation = kernels::Act::Tanh;  // smooth: no kinks for the gradcheck
  o.activate_output = true;
  o.dtype = DType::F64;
  return o;
}

KochBranchOptions tiny_koch(bool bn = false) {
  KochBranchOptions o;
  o.width = 0.05;  // 3/6/6/13 channels
  o.embedding = 8;
  o.batchnorm = bn;
  return o;
}

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> out;
  for (auto& [n, v] : m.named_parameters()) out.push_back(n);
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(MLP, PairSelectionStudyShape) {
  Generator g(1);
  MLPOptions o = MLPOptions::pair_selection();  // 784 -> 300 -> 300 -> 300, ReLU, dropout 0.2
  EXPECT_TRUE(o.activate_output);
  MLP mlp(o, g);
  EXPECT_EQ(names_of(mlp), (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                                     "fc3.weight", "fc3.bias"}));
  EXPECT_EQ(mlp.num_parameters(), 784 * 300 + 300 + 2 * (300 * 300 + 300));
  Variable y = mlp(Variable(test::randn({5, 1, 28, 28}, DType::F32)));  // flattened to 784
  EXPECT_EQ(y.shape(), (Shape{5, 300}));
  EXPECT_THROW(mlp(Variable(test::randn({5, 100}, DType::F32))), Error);
  for (double v : y.data().to_double_vector()) EXPECT_GE(v, 0.0);  // ReLU on the output layer
  // Dropout between layers only in training mode: eval is deterministic.
  mlp.eval();
  Tensor x = test::randn({4, 784}, DType::F32, Device::cpu(), 2);
  EXPECT_TRUE(test::all_close(mlp(Variable(x)).data(), mlp(Variable(x)).data(), 0, 0));
}

TEST(GenericNets, SiameseMlpGradcheck) {
  Generator g(5);
  auto trunk = std::make_shared<MLP>(small_mlp(0.2), g);
  SiameseNet net(trunk, 3, g);
  ASSERT_TRUE(net.has_head() && net.shared());
  EXPECT_EQ(net.head_weight().dtype(), DType::F64);
  ag::GradcheckOptions go;
  go.before_forward = [&] { trunk->dropout_generator().set_state(77, 0); };  // fixed dropout masks
  auto r = ag::gradcheck(
      [&](const std::vector<Variable>& v) {
        auto e = net.embed_pairs(v[0], v[1]);
        return net.logits(e[0], e[1]);
      },
      {test::randn({4, 6}, DType::F64, Device::cpu(), 1), test::randn({4, 6}, DType::F64, Device::cpu(), 2)},
      go);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(GenericNets, TripletMlpGradcheckSharedAndDisjoint) {
  for (TripletShare share : {TripletShare::Full, TripletShare::DisjointAnchor}) {
    SCOPED_TRACE(share == TripletShare::Full ? "full" : "disjoint");
    Generator g(9);
    std::vector<std::shared_ptr<MLP>> made;
    TripletNet net([&] { made.push_back(std::make_shared<MLP>(small_mlp(0.2), g)); return made.back(); }, share);
    ag::GradcheckOptions go;
    go.before_forward = [&] {
      for (auto& m : made) m->dropout_generator().set_state(78, 0);
    };
    auto r = ag::gradcheck(
        [&](const std::vector<Variable>& v) {
          auto e = net.embed_triplets(v[0], v[1], v[2]);
          return ag::add(ag::add(ag::mul(e[0], e[1]), ag::mul(e[1], e[2])), ag::square(e[2]));
        },
        {test::randn({3, 6}, DType::F64, Device::cpu(), 3), test::randn({3, 6}, DType::F64, Device::cpu(), 4),
         test::randn({3, 6}, DType::F64, Device::cpu(), 5)},
        go);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST(GenericNets, SharedVersusDisjointWeights) {
  Generator g(11);
  auto make = [&] { return std::make_shared<MLP>(small_mlp(), g); };
  TripletNet full(make, TripletShare::Full);
  TripletNet disj(make, TripletShare::DisjointAnchor);
  EXPECT_EQ(names_of(full).size(), 6u);
  EXPECT_EQ(names_of(disj).size(), 12u);
  EXPECT_EQ(names_of(disj)[6], "anchor_branch.fc1.weight");
  // Full sharing: the anchor and candidate paths use the very same Variables.
  EXPECT_EQ(&full.anchor_trunk(), &full.trunk());
  auto fp = full.trunk().parameters(), fa = full.anchor_trunk().parameters();
  for (size_t i = 0; i < fp.size(); ++i) EXPECT_TRUE(fp[i].is_same(fa[i]));
  // Disjoint: different Variables; a backward through the anchor path reaches
  // only the anchor branch.
  auto dp = disj.trunk().parameters(), da = disj.anchor_trunk().parameters();
  for (size_t i = 0; i < dp.size(); ++i) EXPECT_FALSE(dp[i].is_same(da[i]));
  ag::sum(disj.embed_anchor(Variable(test::randn({2, 6}, DType::F64)))).backward();
  for (auto& v : da) EXPECT_TRUE(v.has_grad());
  for (auto& v : dp) EXPECT_FALSE(v.has_grad());
  // Siamese with a second trunk.
  SiameseNet s2(make(), 0, g, make());
  EXPECT_FALSE(s2.shared());
  EXPECT_FALSE(s2.has_head());
  EXPECT_THROW(s2.head_weight(), Error);
  auto e = s2.embed_pairs(Variable(test::randn({2, 6}, DType::F64)), Variable(test::randn({2, 6}, DType::F64)));
  EXPECT_EQ(e[1].shape(), (Shape{2, 3}));
  EXPECT_EQ(names_of(s2)[6], "second_branch.fc1.weight");
  // Koch-only helpers say so for other trunks.
  EXPECT_NE(error_of([&] { full.branch(); }).find("not a KochBranch"), std::string::npos);
  EXPECT_THROW(full.param_groups(0.1, 0, 0), Error);
}

TEST(GenericNets, KochConstructorsKeepNamesAndDraws) {
  KochBranchOptions o = tiny_koch(true);
  // Triplet, disjoint: exactly the draws of "branch, then anchor branch" from one generator.
  Generator g1(42), g2(42);
  TripletNet net(o, TripletShare::DisjointAnchor, g1);
  KochBranch b(o, g2), a(o, g2);
  auto n = net.named_parameters();
  auto nb = b.named_parameters(), na = a.named_parameters();
  ASSERT_EQ(n.size(), nb.size() + na.size());
  for (size_t i = 0; i < nb.size(); ++i) {
    EXPECT_EQ(n[i].first, "branch." + nb[i].first);
    EXPECT_TRUE(test::all_close(nb[i].second.data(), n[i].second.data(), 0, 0)) << n[i].first;
  }
  for (size_t i = 0; i < na.size(); ++i) {
    EXPECT_EQ(n[nb.size() + i].first, "anchor_branch." + na[i].first);
    EXPECT_TRUE(test::all_close(na[i].second.data(), n[nb.size() + i].second.data(), 0, 0));
  }
  EXPECT_EQ(n[0].first, "branch.conv1.weight");
  EXPECT_EQ(g1.offset(), g2.offset());
  // Siamese: branch, then the head (Linear's draws, then N(0, dense_w_std), N(dense_b_mean, dense_b_std)).
  Generator g3(7), g4(7);
  SiameseNet s(o, g3);
  KochBranch b2(o, g4);
  Linear head(o.embedding, 1, g4);
  Tensor w = Tensor::empty({1, o.embedding}), bias = Tensor::empty({1});
  init::normal_(w, 0.0, o.init.dense_w_std, g4);
  init::normal_(bias, o.init.dense_b_mean, o.init.dense_b_std, g4);
  EXPECT_TRUE(test::all_close(w, s.head_weight().data(), 0, 0));
  EXPECT_TRUE(test::all_close(bias, s.head_bias().data(), 0, 0));
  EXPECT_TRUE(test::all_close(b2.dense_parameters()[0].data(), s.branch().dense_parameters()[0].data(), 0, 0));
  auto sn = names_of(s);
  EXPECT_EQ(sn.front(), "branch.conv1.weight");
  EXPECT_EQ(sn[sn.size() - 2], "head.weight");
  EXPECT_EQ(sn.back(), "head.bias");
}

TEST(ParamGroups, ByPrefixReproducesKochGroups) {
  Generator g(3);
  SiameseNet net(tiny_koch(true), g);
  const std::vector<double> decays{1e-4, 2e-4, 3e-4, 4e-4, 5e-4, 6e-4};
  auto want = net.param_groups(0.01, 0.5, decays);
  std::vector<GroupSpec> specs;
  const char* layers[5] = {"conv1", "conv2", "conv3", "conv4", "dense"};
  for (int i = 0; i < 5; ++i) {
    std::vector<std::string> pre{std::string("branch.") + layers[i]};
    if (i < 3) pre.push_back("branch.bn" + std::to_string(i + 1) + ".");
    specs.push_back({layers[i], pre, hyper(0.01, decays[i], 0.5)});
  }
  specs.push_back({"head", {"head."}, hyper(0.01, decays[5], 0.5)});
  auto got = param_groups_by_prefix(net, specs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].lr, want[i].lr);
    EXPECT_EQ(got[i].momentum, want[i].momentum);
    EXPECT_EQ(got[i].weight_decay, want[i].weight_decay);
    ASSERT_EQ(got[i].params.size(), want[i].params.size()) << got[i].name;
    for (size_t k = 0; k < got[i].params.size(); ++k) EXPECT_TRUE(got[i].params[k].is_same(want[i].params[k]));
  }
}

TEST(ParamGroups, ByPrefixRulesAndErrors) {
  Generator g(4);
  TripletNet net([&] { return std::make_shared<MLP>(small_mlp(), g); }, TripletShare::DisjointAnchor);
  // First matching group wins; the "" group collects the rest.
  auto groups = param_groups_by_prefix(net, {{"first", {"branch.fc1"}, hyper(0.1)},
                                             {"anchor", {"anchor_branch."}, hyper(0.2, 1e-3)},
                                             {"rest", {""}, hyper(0.3)}});
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].params.size(), 2u);
  EXPECT_EQ(groups[1].params.size(), 6u);
  EXPECT_EQ(groups[2].params.size(), 4u);
  EXPECT_EQ(groups[1].weight_decay, 1e-3);
  EXPECT_EQ(groups[2].lr, 0.3);
  // The groups drive an optimizer.
  SGD opt(groups);
  EXPECT_EQ(opt.group_label(1), "anchor");
  // A prefix that matches nothing.
  std::string e1 = error_of([&] { param_groups_by_prefix(net, {{"x", {"branch.conv"}, hyper(0.1)}, {"r", {""}, hyper(0.1)}}); });
  EXPECT_NE(e1.find("prefix 'branch.conv'"), std::string::npos) << e1;
  // Parameters in no group are listed.
  std::string e2 = error_of([&] { param_groups_by_prefix(net, {{"b", {"branch."}, hyper(0.1)}}); });
  EXPECT_NE(e2.find("anchor_branch.fc1.weight"), std::string::npos) << e2;
  // A group whose parameters were all claimed earlier.
  std::string e3 = error_of([&] {
    param_groups_by_prefix(net, {{"all", {""}, hyper(0.1)}, {"late", {"branch.fc2"}, hyper(0.1)}});
  });
  EXPECT_NE(e3.find("'late' gets no parameters"), std::string::npos) << e3;
}

// The conv4 trunk (nn/models/conv4.h): shapes and names, and a float64 gradcheck
// of a tiny instance (2 blocks of 3 channels on 6x6 inputs, batch-norm in
// training mode, then a dense layer) through the triplet net.
TEST(Conv4Trunk, ShapesNamesAndErrors) {
  Generator g(3);
  Conv4Options o;  // 28x28 -> 1x1 x 64
  Conv4 net(o, g);
  EXPECT_EQ(net.flat_features(), 64);
  Variable y = net.forward(Variable(test::randn({2, 1, 28, 28}, DType::F32, Device::cpu(), 1)));
  EXPECT_EQ(y.size(0), 2);
  EXPECT_EQ(y.size(1), 64);
  auto names = names_of(net);
  EXPECT_EQ(names.front(), "block1.conv.weight");
  EXPECT_EQ(names.size(), 16u);  // 4 x (conv w, b, bn w, b)
  o.input_size = 52;
  o.embedding = 16;
  Conv4 wide(o, g);
  EXPECT_EQ(wide.flat_features(), 64 * 3 * 3);
  EXPECT_EQ(wide.output_features(), 16);
  EXPECT_EQ(names_of(wide).back(), "dense.bias");
  o.input_size = 12;
  EXPECT_NE(error_of([&] { Conv4 tiny(o, g); }).find("too small"), std::string::npos);
  EXPECT_NE(error_of([&] { net.forward(Variable(test::randn({2, 1, 27, 27}, DType::F32, Device::cpu(), 1))); })
                .find("Conv4: expected input"),
            std::string::npos);
}

// Conv4 pools before its ReLU: relu(max_pool(x)) must equal max_pool(relu(x)) bit for bit,
// values and input gradients, with windows whose maximum is negative, zero, or tied.
TEST(Conv4Trunk, ReluAfterMaxPoolIsExactlyReluBeforeIt) {
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor x = test::randn({3, 4, 10, 10}, dt, Device::cpu(), 5);
    std::vector<double> v = x.to_double_vector();
    for (size_t i = 0; i < v.size(); i += 7) v[i] = 0.0;                 // zeros, some windows all <= 0
    for (size_t i = 0; i + 1 < v.size(); i += 11) v[i + 1] = v[i];       // ties inside windows
    for (size_t i = 0; i + 20 < v.size(); i += 40) v[i] = v[i + 1] = v[i + 10] = v[i + 11] = -0.5;
    x = Tensor::from_vector(v, x.shape()).to(dt);
    const Tensor gy = test::randn({3, 4, 5, 5}, dt, Device::cpu(), 6);
    kernels::Pool2dParams p;
    auto run = [&](bool pool_first, Tensor& gx) {
      Variable in(x.clone(), true);
      Variable y = pool_first ? ag::relu(ag::max_pool2d(in, p)) : ag::max_pool2d(ag::relu(in), p);
      ag::sum(ag::mul(y, Variable(gy))).backward();
      gx = in.grad();
      return y.data();
    };
    Tensor g1, g2;
    const Tensor y1 = run(true, g1), y2 = run(false, g2);
    EXPECT_EQ(y1.to_double_vector(), y2.to_double_vector());
    EXPECT_EQ(g1.to_double_vector(), g2.to_double_vector());
    size_t nonzero = 0;
    for (double g : g1.to_double_vector()) nonzero += g != 0;
    EXPECT_GT(nonzero, 50u);  // the gradients are not trivially zero
  }
}

TEST(Conv4Trunk, GradcheckTinyThroughTripletNet) {
  Generator g(21);
  Conv4Options o;
  o.input_size = 6;
  o.channels = 3;
  o.blocks = 2;
  o.embedding = 4;
  o.dtype = DType::F64;
  auto trunk = std::make_shared<Conv4>(o, g);
  TripletNet net(trunk);
  ag::GradcheckOptions go;
  auto r = ag::gradcheck(
      [&](const std::vector<Variable>& v) {
        auto e = net.embed_triplets(v[0], v[1], v[2]);
        return ag::add(ag::mul(e[0], e[1]), ag::square(e[2]));
      },
      {test::randn({2, 1, 6, 6}, DType::F64, Device::cpu(), 6), test::randn({2, 1, 6, 6}, DType::F64, Device::cpu(), 7),
       test::randn({2, 1, 6, 6}, DType::F64, Device::cpu(), 8)},
      go);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_GT(r.checked, 50);
}
