// Optimizers (SGD / momentum / Nesterov / dampening, Adam, AdamW), parameter
// groups, schedules and gradient clipping against float64 reference loops that
// implement PyTorch's update equations directly; fused CUDA step vs the CPU.
#include <gtest/gtest.h>

#include "runtime/allocator.h"

#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "autograd/variable.h"
#include "kernels/gemm_config.h"
#include "kernels/optim.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/schedule.h"
#include "tests/common/test_util.h"

namespace {

using mn::DType;
using mn::Device;
using mn::Tensor;
using mn::ag::Variable;
using mn::nn::Adam;
using mn::nn::AdamW;
using mn::nn::ParamGroup;
using mn::nn::SGD;
using Vec = std::vector<double>;

// ---- float64 references (torch.optim's equations, element by element) ---------

struct RefState {
  Vec p, buf, m, v;
  bool started = false;
  int64_t t = 0;
};

void ref_sgd(RefState& s, const Vec& g, const ParamGroup& h) {
  if (s.buf.empty()) s.buf.assign(s.p.size(), 0.0);
  for (size_t i = 0; i < s.p.size(); ++i) {
    double d = g[i] + h.weight_decay * s.p[i];
    if (h.momentum != 0.0) {
      s.buf[i] = s.started ? h.momentum * s.buf[i] + (1.0 - h.dampening) * d : d;
      d = h.nesterov ? d + h.momentum * s.buf[i] : s.buf[i];
    }
    s.p[i] -= h.lr * d;
  }
  if (h.momentum != 0.0) s.started = true;
}

void ref_adam(RefState& s, const Vec& g, const ParamGroup& h, bool decoupled) {
  if (s.m.empty()) s.m.assign(s.p.size(), 0.0), s.v.assign(s.p.size(), 0.0);
  s.t += 1;
  const double b1 = h.betas.first, b2 = h.betas.second;
  const double bc1 = 1.0 - std::pow(b1, s.t), bc2 = 1.0 - std::pow(b2, s.t);
  for (size_t i = 0; i < s.p.size(); ++i) {
    double d = g[i];
    if (decoupled)
      s.p[i] *= 1.0 - h.lr * h.weight_decay;
    else
      d += h.weight_decay * s.p[i];
    s.m[i] = b1 * s.m[i] + (1.0 - b1) * d;
    s.v[i] = b2 * s.v[i] + (1.0 - b2) * d * d;
    const double denom = std::sqrt(s.v[i]) / std::sqrt(bc2) + h.eps;
    s.p[i] -= h.lr / bc1 * s.m[i] / denom;
  }
}

// Values rounded to T, so the reference sees exactly the inputs the optimizer sees.
template <typename T>
Vec rounded(Vec v) {
  for (auto& x : v) x = static_cast<double>(static_cast<T>(x));
  return v;
}

// Sizes: tiny, one full chunk plus a tail (chunks are 8192), and an odd shape.
const std::vector<mn::Shape> kShapes = {{7}, {3, 5000}, {4, 3, 3}};

template <typename T>
struct Setup {
  std::vector<Variable> params;
  std::vector<RefState> ref;
};

template <typename T>
Setup<T> make_params(uint64_t seed, Device dev = Device::cpu()) {
  Setup<T> s;
  for (size_t k = 0; k < kShapes.size(); ++k) {
    const int64_t n = mn::numel_of(kShapes[k]);
    Vec p = rounded<T>(mn::test::rand_vec(n, -1.0, 1.0, seed + k));
    s.params.emplace_back(Tensor::from_vector(std::vector<T>(p.begin(), p.end()), kShapes[k], dev),
                          true);
    RefState r;
    r.p = p;
    s.ref.push_back(r);
  }
  return s;
}

// Writes step `step`'s gradient into each parameter (in place after the first
// step, as accumulation does) and returns the reference copies.
template <typename T>
std::vector<Vec> set_grads(std::vector<Variable>& params, int step, uint64_t seed) {
  std::vector<Vec> out;
  for (size_t k = 0; k < params.size(); ++k) {
    Vec g = rounded<T>(mn::test::rand_vec(params[k].numel(), -1.0, 1.0, seed * 100 + step * 10 + k));
    Tensor gt = Tensor::from_vector(std::vector<T>(g.begin(), g.end()), params[k].shape(),
                                    params[k].device());
    if (params[k].has_grad()) {
      Tensor dst = params[k].grad();
      dst.copy_(gt);
    } else {
      params[k].set_grad(gt);
    }
    out.push_back(g);
  }
  return out;
}

// Tolerances: float64 runs the same operations as the reference in a slightly
// different order (e.g. sqrt(v) * (1/sqrt(bc2)) vs sqrt(v) / sqrt(bc2)): a few
// ulps per step -> 1e-12. float32: ~10 roundings of 6e-8 per step over 6 steps on
// values O(1) (Adam's m / sqrt(v) is O(1) too) -> 2e-5 covers it with margin.
template <typename T>
double tol() {
  return std::is_same_v<T, double> ? 1e-12 : 2e-5;
}

template <typename T>
class OptimTyped : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(OptimTyped, FloatTypes);

enum class Kind { Sgd, Adam, AdamW };

// Runs `steps` steps of the optimizer built from `groups_of(params)` and of
// the reference, with a learning rate change half way (as a schedule would).
template <typename T>
void run_vs_reference(Kind kind, const std::vector<ParamGroup>& hypers, int steps = 6) {
  auto s = make_params<T>(11);
  // Group k gets parameters k, k + ngroups, ...
  std::vector<ParamGroup> groups = hypers;
  for (auto& g : groups) g.params.clear();
  for (size_t i = 0; i < s.params.size(); ++i) groups[i % groups.size()].params.push_back(s.params[i]);
  std::unique_ptr<mn::nn::Optimizer> opt;
  if (kind == Kind::Sgd) opt = std::make_unique<SGD>(groups);
  if (kind == Kind::Adam) opt = std::make_unique<Adam>(groups);
  if (kind == Kind::AdamW) opt = std::make_unique<AdamW>(groups);
  for (int step = 0; step < steps; ++step) {
    if (step == steps / 2)
      for (size_t g = 0; g < groups.size(); ++g) {
        opt->group(g).lr *= 0.5;
        groups[g].lr *= 0.5;
      }
    auto grads = set_grads<T>(s.params, step, 5);
    opt->step();
    for (size_t i = 0; i < s.params.size(); ++i) {
      const ParamGroup& h = groups[i % groups.size()];
      if (kind == Kind::Sgd) ref_sgd(s.ref[i], grads[i], h);
      else ref_adam(s.ref[i], grads[i], h, kind == Kind::AdamW);
    }
  }
  for (size_t i = 0; i < s.params.size(); ++i)
    EXPECT_TRUE(mn::test::all_close(s.ref[i].p, s.params[i].data().to_double_vector(), tol<T>(),
                                    tol<T>()))
        << "parameter " << i;
  EXPECT_EQ(opt->step_count(0), steps);
}

ParamGroup hyper(double lr, double mom = 0, double wd = 0, double damp = 0, bool nest = false) {
  ParamGroup g;
  g.lr = lr;
  g.momentum = mom;
  g.weight_decay = wd;
  g.dampening = damp;
  g.nesterov = nest;
  return g;
}

TYPED_TEST(OptimTyped, PlainSgd) { run_vs_reference<TypeParam>(Kind::Sgd, {hyper(0.1)}); }
TYPED_TEST(OptimTyped, SgdMomentumWeightDecay) {
  run_vs_reference<TypeParam>(Kind::Sgd, {hyper(0.05, 0.9, 1e-2)});
}
TYPED_TEST(OptimTyped, SgdDampening) {
  run_vs_reference<TypeParam>(Kind::Sgd, {hyper(0.05, 0.8, 0.0, 0.3)});
}
TYPED_TEST(OptimTyped, SgdNesterov) {
  run_vs_reference<TypeParam>(Kind::Sgd, {hyper(0.05, 0.9, 1e-3, 0.0, true)});
}
TYPED_TEST(OptimTyped, Adam) {
  ParamGroup g = hyper(1e-2, 0, 1e-3);
  run_vs_reference<TypeParam>(Kind::Adam, {g});
}
TYPED_TEST(OptimTyped, AdamW) {
  ParamGroup g = hyper(1e-2, 0, 0.1);
  g.betas = {0.8, 0.99};
  g.eps = 1e-6;
  run_vs_reference<TypeParam>(Kind::AdamW, {g});
}
// Per-layer hyperparameters: Koch's per-layer SGD and the Omniglot study's
// 2e-4 (conv) / 1e-3 (dense) L2 decay with Adam.
TYPED_TEST(OptimTyped, SgdParamGroups) {
  run_vs_reference<TypeParam>(Kind::Sgd, {hyper(0.1, 0.5, 1e-2), hyper(0.01, 0.9, 0.0, 0.0, true)});
}
TYPED_TEST(OptimTyped, AdamParamGroups) {
  ParamGroup conv = hyper(1e-4, 0, 2e-4), dense = hyper(3e-3, 0, 1e-3);
  conv.name = "conv";
  dense.name = "dense";
  run_vs_reference<TypeParam>(Kind::Adam, {conv, dense});
}

// ---- one launch for all Adam groups, and the gradient zeroed by the update ----------------

// Every parameter's (or gradient's) values, bit patterns compared by ==, of a setup.
template <typename T>
std::vector<std::vector<T>> values(const std::vector<Variable>& ps, bool grads) {
  std::vector<std::vector<T>> out;
  for (const Variable& v : ps) out.push_back((grads ? v.grad() : v.data()).template to_vector<T>());
  return out;
}

std::unique_ptr<mn::nn::Optimizer> build_two_groups(Kind kind, std::vector<Variable>& ps) {
  ParamGroup a = hyper(0.05, 0.9, 1e-2), b = hyper(0.02, 0.5, 1e-3);
  if (kind != Kind::Sgd) a = hyper(1e-2, 0, 1e-2), b = hyper(3e-3, 0, 1e-3), b.betas = {0.8, 0.99};
  a.params = {ps[0], ps[2]};
  b.params = {ps[1]};
  if (kind == Kind::Sgd) return std::make_unique<SGD>(std::vector<ParamGroup>{a, b});
  if (kind == Kind::Adam) return std::make_unique<Adam>(std::vector<ParamGroup>{a, b});
  return std::make_unique<AdamW>(std::vector<ParamGroup>{a, b});
}

// step_and_zero_grad() is step() then zero_grad(): the same parameters bit for bit and
// every gradient +0 (the kernels zero what they read).
template <typename T>
void step_and_zero_matches(Kind kind, Device dev) {
  auto x = make_params<T>(41, dev), y = make_params<T>(41, dev);
  auto ox = build_two_groups(kind, x.params), oy = build_two_groups(kind, y.params);
  for (int step = 0; step < 4; ++step) {
    set_grads<T>(x.params, step, 3);
    set_grads<T>(y.params, step, 3);
    ox->step();
    ox->zero_grad();
    oy->step_and_zero_grad();
    EXPECT_EQ(values<T>(x.params, false), values<T>(y.params, false)) << "step " << step;
    for (const auto& g : values<T>(y.params, true))
      for (T v : g) ASSERT_TRUE(v == T(0) && !std::signbit(v)) << "step " << step;
  }
  EXPECT_EQ(ox->step_count(0), oy->step_count(0));
}

TYPED_TEST(OptimTyped, StepAndZeroGradIsStepThenZeroGrad) {
  for (Kind k : {Kind::Sgd, Kind::Adam, Kind::AdamW}) step_and_zero_matches<TypeParam>(k, Device::cpu());
}

// The multi-group kernel (kernels::fused_adam_step_groups) against one launch per group
// (fused_adam_step), bit for bit: three groups of different hyperparameters, AdamW's
// decoupled decay in one of them, with and without zeroing.
template <typename T>
void groups_kernel_matches_per_group(Device dev) {
  using mn::kernels::AdamHyper;
  using mn::kernels::MultiTensorDesc;
  auto a = make_params<T>(51, dev), b = make_params<T>(51, dev);
  std::vector<std::array<Tensor, 2>> sa, sb;
  for (size_t i = 0; i < a.params.size(); ++i) {
    const Tensor& p = a.params[i].data();
    sa.push_back({Tensor::zeros(p.shape(), p.dtype(), dev), Tensor::zeros(p.shape(), p.dtype(), dev)});
    sb.push_back({Tensor::zeros(p.shape(), p.dtype(), dev), Tensor::zeros(p.shape(), p.dtype(), dev)});
  }
  std::vector<AdamHyper> hs(3);
  hs[0].lr = 1e-2, hs[0].weight_decay = 1e-2;
  hs[1].lr = 3e-3, hs[1].beta1 = 0.8, hs[1].beta2 = 0.99, hs[1].eps = 1e-6;
  hs[2].lr = 5e-3, hs[2].weight_decay = 0.1, hs[2].decoupled = true;
  auto desc = [](Variable& v, std::array<Tensor, 2>& st, int64_t group) {
    MultiTensorDesc d;
    d.param = v.data().raw_data(), d.grad = v.grad().raw_data();
    d.state0 = st[0].raw_data(), d.state1 = st[1].raw_data();
    d.numel = v.numel(), d.group = group;
    return d;
  };
  std::vector<mn::kernels::MultiTensorPlan> one(a.params.size());
  mn::kernels::MultiTensorPlan plan;
  for (int step = 1; step <= 4; ++step) {
    const bool zero = step % 2 == 0;
    set_grads<T>(a.params, step, 9);
    set_grads<T>(b.params, step, 9);
    std::vector<MultiTensorDesc> all;
    for (size_t i = 0; i < a.params.size(); ++i) {
      one[i].set({desc(a.params[i], sa[i], 0)});
      AdamHyper h = hs[i];
      h.step = step, h.zero_grad = zero;
      mn::kernels::fused_adam_step(one[i], mn::dtype_of<T>, dev, h);
      all.push_back(desc(b.params[i], sb[i], static_cast<int64_t>(i)));
    }
    plan.set(all);
    for (auto& h : hs) h.step = step;
    mn::kernels::fused_adam_step_groups(plan, mn::dtype_of<T>, dev, hs, zero);
    EXPECT_EQ(values<T>(a.params, false), values<T>(b.params, false)) << "step " << step;
    EXPECT_EQ(values<T>(a.params, true), values<T>(b.params, true)) << "step " << step;
  }
}

TYPED_TEST(OptimTyped, AdamGroupsKernelMatchesOneLaunchPerGroup) {
  groups_kernel_matches_per_group<TypeParam>(Device::cpu());
}

// More groups than one launch's table (kernels::kMaxAdamGroups): the Optimizer splits
// them over launches; every group still follows the float64 reference.
TYPED_TEST(OptimTyped, AdamMoreGroupsThanOneLaunchTakes) {
  using T = TypeParam;
  const int n = mn::kernels::kMaxAdamGroups + 3;
  std::vector<Variable> ps;
  std::vector<RefState> ref(n);
  std::vector<ParamGroup> groups;
  for (int k = 0; k < n; ++k) {
    Vec p = rounded<T>(mn::test::rand_vec(5 + k, -1.0, 1.0, 70 + k));
    ps.emplace_back(Tensor::from_vector(std::vector<T>(p.begin(), p.end()), {5 + k}), true);
    ref[k].p = p;
    ParamGroup g = hyper(1e-3 * (k + 1), 0, k % 2 ? 1e-2 : 0.0);
    g.params = {ps.back()};
    groups.push_back(g);
  }
  Adam opt(groups);
  for (int step = 0; step < 3; ++step) {
    auto grads = set_grads<T>(ps, step, 13);
    opt.step_and_zero_grad();
    for (int k = 0; k < n; ++k) ref_adam(ref[k], grads[k], groups[k], false);
  }
  for (int k = 0; k < n; ++k)
    EXPECT_TRUE(mn::test::all_close(ref[k].p, ps[k].data().to_double_vector(), tol<T>(), tol<T>())) << k;
  EXPECT_EQ(opt.step_count(n - 1), 3);
}

TEST(Optim, ParametersWithoutGradAreSkipped) {
  Variable a(Tensor::ones({3}), true), b(Tensor::ones({2}), true);
  SGD opt({a, b}, 0.5);
  a.set_grad(Tensor::full({3}, 2.0));
  opt.step();
  EXPECT_EQ(a.data().to_double_vector(), (Vec{0.0, 0.0, 0.0}));
  EXPECT_EQ(b.data().to_double_vector(), (Vec{1.0, 1.0}));
}

TEST(Optim, SharedParameterListedTwiceThrows) {
  Variable a(Tensor::ones({3}), true);
  ParamGroup g1 = hyper(0.1), g2 = hyper(0.2);
  g1.params = {a};
  g2.params = {a};
  EXPECT_THROW(SGD({g1, g2}), mn::Error);
}

TEST(Optim, MixedDtypesInOneGroupThrow) {
  Variable a(Tensor::ones({3}), true), b(Tensor::ones({2}, DType::F64), true);
  SGD opt({a, b}, 0.1);
  a.set_grad(Tensor::ones({3}));
  b.set_grad(Tensor::ones({2}, DType::F64));
  EXPECT_THROW(opt.step(), mn::Error);
}

TEST(Optim, StateDictResumeMatchesUninterrupted) {
  // Run A: 6 steps. Run B: 3 steps, state copied into a fresh optimizer, 3 more.
  auto a = make_params<double>(3), b = make_params<double>(3);
  ParamGroup ha = hyper(1e-2), hb = hyper(1e-2);
  ha.params = a.params;
  hb.params = b.params;
  Adam oa({ha});
  auto ob = std::make_unique<Adam>(std::vector<ParamGroup>{hb});
  for (int step = 0; step < 6; ++step) {
    set_grads<double>(a.params, step, 9);
    oa.step();
    if (step == 3) {
      std::map<std::string, Tensor> saved;
      for (auto& [n, t] : ob->state_dict()) saved[n] = t.clone();
      EXPECT_TRUE(saved.count("optim.group0.step"));
      EXPECT_TRUE(saved.count("optim.group0.2.exp_avg_sq"));
      ob = std::make_unique<Adam>(std::vector<ParamGroup>{hb});
      ob->load_state_dict(saved, "test");
      EXPECT_EQ(ob->step_count(0), 3);
    }
    set_grads<double>(b.params, step, 9);
    ob->step();
  }
  for (size_t i = 0; i < a.params.size(); ++i)
    EXPECT_TRUE(mn::test::all_close(a.params[i].data(), b.params[i].data(), 0, 0));  // bitwise
  std::map<std::string, Tensor> missing;
  EXPECT_THROW(ob->load_state_dict(missing, "empty"), mn::Error);
}

// ---- schedules -----------------------------------------------------------------------

TEST(OptimSchedule, ExponentialDecayKoch) {
  Variable a(Tensor::ones({1}), true), b(Tensor::ones({1}), true);
  ParamGroup g1 = hyper(0.1), g2 = hyper(0.02);
  g1.params = {a};
  g2.params = {b};
  SGD opt({g1, g2});
  mn::nn::ExponentialDecay sched(opt, 0.99);
  double expect1 = 0.1, expect2 = 0.02;  // multiplied by 0.99 once per epoch
  for (int e = 0; e < 30; ++e) {
    sched.apply(e);
    EXPECT_NEAR(opt.group(0).lr, expect1, 1e-15) << e;
    EXPECT_NEAR(opt.group(1).lr, expect2, 1e-15) << e;
    expect1 *= 0.99;
    expect2 *= 0.99;
  }
}

TEST(OptimSchedule, StepDecay) {
  Variable a(Tensor::ones({1}), true);
  SGD opt({a}, 0.5);
  mn::nn::StepDecay sched(opt, 8, 0.1);
  for (int e = 0; e < 25; ++e) {
    sched.apply(e);
    const double expect = e < 8 ? 0.5 : e < 16 ? 0.05 : e < 24 ? 0.005 : 0.0005;
    EXPECT_NEAR(opt.group(0).lr, expect, 1e-15) << e;
  }
}

// Half a cosine from each group's lr over E epochs, written out per epoch
// (not by the formula): E = 4 gives factors 1, (1 + cos(pi/4))/2, 1/2,
// (1 + cos(3 pi/4))/2, and epochs at or past E (a longer resumed run) stay at 0.
TEST(OptimSchedule, CosineDecayPerGroup) {
  Variable a(Tensor::ones({1}), true), b(Tensor::ones({1}), true);
  ParamGroup g1 = hyper(0.1), g2 = hyper(0.02);
  g1.params = {a};
  g2.params = {b};
  SGD opt({g1, g2});
  mn::nn::CosineDecay sched(opt, 4);
  const double r = std::sqrt(0.5);  // cos(pi/4)
  const double want[] = {1.0, (1 + r) / 2, 0.5, (1 - r) / 2, 0.0, 0.0};
  for (int e = 0; e < 6; ++e) {
    sched.apply(e);
    EXPECT_NEAR(opt.group(0).lr, 0.1 * want[e], 1e-15) << e;
    EXPECT_NEAR(opt.group(1).lr, 0.02 * want[e], 1e-15) << e;
  }
  sched.apply(1);  // a pure function of the epoch: going back (a resume) gives the same lr
  EXPECT_NEAR(opt.group(0).lr, 0.1 * want[1], 1e-15);
  EXPECT_THROW(mn::nn::CosineDecay(opt, 0), mn::Error);
}

TEST(OptimSchedule, LinearMomentumRampPerGroup) {
  Variable a(Tensor::ones({1}), true), b(Tensor::ones({1}), true);
  ParamGroup g1 = hyper(0.1, 0.9), g2 = hyper(0.1, 0.7);
  g1.params = {a};
  g2.params = {b};
  SGD opt({g1, g2});
  mn::nn::MomentumRamp ramp(opt, 0.5, 10);
  const Vec want1 = {0.5, 0.54, 0.58, 0.62, 0.66, 0.70, 0.74, 0.78, 0.82, 0.86, 0.9, 0.9, 0.9};
  for (int e = 0; e < 13; ++e) {
    ramp.apply(e);
    EXPECT_NEAR(opt.group(0).momentum, want1[e], 1e-12) << e;
    EXPECT_NEAR(opt.group(1).momentum, 0.5 + 0.02 * std::min(e, 10), 1e-12) << e;
  }
}

// ---- clipping ------------------------------------------------------------------------

TYPED_TEST(OptimTyped, ClipGradNorm) {
  using T = TypeParam;
  auto s = make_params<T>(21);
  auto grads = set_grads<T>(s.params, 0, 4);
  double sq = 0;
  for (auto& g : grads)
    for (double x : g) sq += x * x;
  const double norm = std::sqrt(sq);
  SGD opt(s.params, 0.1);
  // The on-device form: the same norm, read by nobody until the caller wants it.
  const uint64_t reads = mn::transfer_stats().host_reads;
  const mn::Tensor on_device = opt.clip_grad_norm_on_device(norm * 2);
  EXPECT_EQ(mn::transfer_stats().host_reads, reads);
  EXPECT_NEAR(on_device.item(), norm, 1e-9 * norm);
  // Above the norm: nothing changes.
  EXPECT_NEAR(opt.clip_grad_norm(norm * 2), norm, 1e-9 * norm);
  for (size_t i = 0; i < grads.size(); ++i)
    EXPECT_TRUE(mn::test::all_close(grads[i], s.params[i].grad().to_double_vector(), 0, 0));
  // Below: scaled by max_norm / (norm + 1e-6).
  const double max_norm = norm / 3;
  EXPECT_NEAR(opt.clip_grad_norm(max_norm), norm, 1e-9 * norm);
  const double c = max_norm / (norm + 1e-6);
  double sq2 = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    Vec want = grads[i];
    for (auto& x : want) x *= c;
    // One multiply in T after a double-accumulated norm: ~1 ulp.
    EXPECT_TRUE(mn::test::all_close(want, s.params[i].grad().to_double_vector(), 1e-12,
                                    std::is_same_v<T, double> ? 1e-14 : 2e-7));
    for (double x : s.params[i].grad().to_double_vector()) sq2 += x * x;
  }
  EXPECT_NEAR(std::sqrt(sq2), max_norm, 1e-6 * norm);
  // The standalone function agrees.
  EXPECT_NEAR(mn::nn::clip_grad_norm(s.params, 1e9), std::sqrt(sq2), 1e-9 * norm);
}

// ---- CUDA parity -----------------------------------------------------------------------

template <typename T>
void cuda_parity(Kind kind) {
  auto cpu = make_params<T>(31), gpu = make_params<T>(31, Device::cuda());
  ParamGroup h1 = hyper(0.05, 0.9, 1e-2, 0.0, true), h2 = hyper(0.02, 0.5, 1e-3);
  if (kind != Kind::Sgd) h1 = hyper(1e-2, 0, 1e-2), h2 = hyper(3e-3, 0, 1e-3);
  auto build = [&](std::vector<Variable>& ps) -> std::unique_ptr<mn::nn::Optimizer> {
    ParamGroup a = h1, b = h2;
    a.params = {ps[0], ps[2]};
    b.params = {ps[1]};
    if (kind == Kind::Sgd) return std::make_unique<SGD>(std::vector<ParamGroup>{a, b});
    if (kind == Kind::Adam) return std::make_unique<Adam>(std::vector<ParamGroup>{a, b});
    return std::make_unique<AdamW>(std::vector<ParamGroup>{a, b});
  };
  auto oc = build(cpu.params), og = build(gpu.params);
  for (int step = 0; step < 5; ++step) {
    set_grads<T>(cpu.params, step, 7);
    set_grads<T>(gpu.params, step, 7);
    const double nc = oc->clip_grad_norm(20.0), ng = og->clip_grad_norm(20.0);
    // Norms: double accumulation in a different order -> relative 1e-12.
    EXPECT_NEAR(nc, ng, 1e-12 * nc);
    oc->step();
    og->step();
  }
  // Same arithmetic in T; GPU may contract into FMAs: a few ulps per step.
  const double t = std::is_same_v<T, double> ? 1e-12 : 1e-5;
  for (size_t i = 0; i < cpu.params.size(); ++i)
    EXPECT_TRUE(mn::test::all_close(cpu.params[i].data(), gpu.params[i].data(), t, t)) << i;
  // The step counts in the state agree (Adam's GPU count lives on the device).
  const auto sc = oc->state_dict(), sg = og->state_dict();
  ASSERT_EQ(sc.size(), sg.size());
  for (size_t i = 0; i < sc.size(); ++i)
    if (sc[i].first.find(".step") != std::string::npos) {
      EXPECT_EQ(sc[i].second.item(), sg[i].second.item()) << sc[i].first;
    }
  // Descriptor tables uploaded once, not once per step: per group for SGD, one table for
  // Adam's groups (one launch; per group with MN_OPTIM_ONE_LAUNCH=0).
  const bool one = kind != Kind::Sgd && mn::kernels::cuda_speedups().optim_one_launch;
  EXPECT_EQ(og->plan_uploads(), one ? 1 : 2);
}

TYPED_TEST(OptimTyped, CudaSgdMatchesCpu) {
  MN_SKIP_IF_NO_CUDA();
  cuda_parity<TypeParam>(Kind::Sgd);
}
TYPED_TEST(OptimTyped, CudaAdamMatchesCpu) {
  MN_SKIP_IF_NO_CUDA();
  cuda_parity<TypeParam>(Kind::Adam);
}
TYPED_TEST(OptimTyped, CudaAdamWMatchesCpu) {
  MN_SKIP_IF_NO_CUDA();
  cuda_parity<TypeParam>(Kind::AdamW);
}

// The one-launch Adam on a GPU against the per-group launches (MN_OPTIM_ONE_LAUNCH=0),
// bit for bit, with the device step counts; step_and_zero_grad on every other step.
template <typename T>
void cuda_one_launch_vs_per_group(Kind kind) {
  const mn::kernels::CudaSpeedups saved = mn::kernels::cuda_speedups();
  auto run = [&](bool one) {
    mn::kernels::CudaSpeedups s = saved;
    s.optim_one_launch = one;
    mn::kernels::set_cuda_speedups(s);
    auto x = make_params<T>(61, Device::cuda());
    auto opt = build_two_groups(kind, x.params);
    for (int step = 0; step < 4; ++step) {
      set_grads<T>(x.params, step, 17);
      if (step % 2) opt->step_and_zero_grad();
      else opt->step();
    }
    std::vector<double> counts;
    for (const auto& [name, t] : opt->state_dict())
      if (name.find(".step") != std::string::npos) counts.push_back(t.item());
    return std::make_pair(values<T>(x.params, false), counts);
  };
  const auto per_group = run(false), one = run(true);
  mn::kernels::set_cuda_speedups(saved);
  EXPECT_EQ(per_group.first, one.first);
  EXPECT_EQ(per_group.second, one.second);
  EXPECT_EQ(one.second, std::vector<double>({4.0, 4.0}));
}

TYPED_TEST(OptimTyped, CudaAdamOneLaunchMatchesPerGroupLaunches) {
  MN_SKIP_IF_NO_CUDA();
  cuda_one_launch_vs_per_group<TypeParam>(Kind::Adam);
  cuda_one_launch_vs_per_group<TypeParam>(Kind::AdamW);
}
TYPED_TEST(OptimTyped, CudaAdamGroupsKernelMatchesOneLaunchPerGroup) {
  MN_SKIP_IF_NO_CUDA();
  groups_kernel_matches_per_group<TypeParam>(Device::cuda());
}
TYPED_TEST(OptimTyped, CudaStepAndZeroGradIsStepThenZeroGrad) {
  MN_SKIP_IF_NO_CUDA();
  for (Kind k : {Kind::Sgd, Kind::Adam, Kind::AdamW}) step_and_zero_matches<TypeParam>(k, Device::cuda());
}

}  // namespace
