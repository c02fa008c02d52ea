// Float64 gradient checks of the autograd-wired fused losses (nn/losses):
// central differences through ag::gradcheck; hinge kinks auto-skipped.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "nn/losses/losses.h"
#include "tests/common/test_util.h"

using namespace mn;
using namespace mn::nn;

namespace {
const TripletKind kKinds[] = {TripletKind::Schroff,      TripletKind::Kumar,
                              TripletKind::MarginL2,     TripletKind::SoftMargin,
                              TripletKind::SoftmaxRatio, TripletKind::Global,
                              TripletKind::GlobalTriplet};
}

TEST(LossGrad, TripletKindsDenseAndIndexed) {
  const int64_t N = 6, D = 4;
  std::vector<Tensor> in = {test::randn({N, D}, DType::F64, Device::cpu(), 1),
                            test::randn({N, D}, DType::F64, Device::cpu(), 2),
                            test::randn({N, D}, DType::F64, Device::cpu(), 3)};
  Tensor idx = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 1, 0, 3, 2, 2, 4, 5, 4, 0, 3, 5, 1},
                                   {5, 3});
  for (TripletKind k : kKinds)
    for (Reduction red : {Reduction::Mean, Reduction::MeanNonZero, Reduction::Sum})
      for (int sq : {0, 1}) {
        SCOPED_TRACE(std::string(kernels::triplet_kind_name(k)) + " red " +
                     std::to_string(static_cast<int>(red)) + " squared " + std::to_string(sq));
        TripletLossOptions o;
        o.kind = k;
        o.margin = (k == TripletKind::Kumar || k == TripletKind::GlobalTriplet) ? 0.5 : 1.0;
        o.reduction = red;
        o.squared = sq;
        auto r = ag::gradcheck(
            [&](const std::vector<ag::Variable>& v) { return triplet_loss(v[0], v[1], v[2], o).loss; },
            in);
        EXPECT_TRUE(r.ok) << r.message;
        auto ri = ag::gradcheck(
            [&](const std::vector<ag::Variable>& v) { return triplet_loss(v[0], idx, o).loss; },
            {in[0]});
        EXPECT_TRUE(ri.ok) << ri.message;
      }
}

TEST(LossGrad, Contrastive) {
  const int64_t N = 8, D = 3;
  std::vector<Tensor> in = {test::randn({N, D}, DType::F64, Device::cpu(), 4),
                            test::randn({N, D}, DType::F64, Device::cpu(), 5)};
  Tensor lab = Tensor::from_vector(std::vector<int64_t>{0, 1, 0, 1, 1, 0, 0, 1}, {N});
  Tensor pairs = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 0, 5, 7, 6, 4}, {N, 2});
  for (ContrastiveForm f : {ContrastiveForm::Hadsell, ContrastiveForm::Sampling}) {
    ContrastiveOptions o;
    o.form = f;
    o.margin = 2.5;
    auto r = ag::gradcheck(
        [&](const std::vector<ag::Variable>& v) { return contrastive_loss(v[0], v[1], lab, o).loss; },
        in);
    EXPECT_TRUE(r.ok) << r.message;
    auto ri = ag::gradcheck(
        [&](const std::vector<ag::Variable>& v) { return contrastive_loss(v[0], pairs, lab, o).loss; },
        {in[0]});
    EXPECT_TRUE(ri.ok) << ri.message;
  }
}

TEST(LossGrad, KochSiamese) {
  const int64_t N = 5, D = 4;
  std::vector<Tensor> in = {test::rand({N, D}, 0, 1, DType::F64, Device::cpu(), 6),
                            test::rand({N, D}, 0, 1, DType::F64, Device::cpu(), 7),
                            test::randn({1, D}, DType::F64, Device::cpu(), 8),
                            Tensor::full({1}, 0.2, DType::F64)};
  Tensor tg = Tensor::from_vector(std::vector<double>{1, 0, 1, 0, 0}, {N});
  auto r = ag::gradcheck(
      [&](const std::vector<ag::Variable>& v) {
        return koch_siamese_loss(v[0], v[1], v[2], v[3], tg).loss;
      },
      in);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(LossGrad, Lmnn) {
  std::vector<Tensor> in = {test::randn({8, 4}, DType::F64, Device::cpu(), 9),
                            test::randn({4, 3}, DType::F64, Device::cpu(), 10)};
  Tensor pairs = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor trip = Tensor::from_vector(std::vector<int64_t>{0, 1, 6, 2, 3, 7, 4, 5, 6, 0, 1, 7}, {4, 3});
  auto r = ag::gradcheck(
      [&](const std::vector<ag::Variable>& v) { return lmnn_loss(v[0], v[1], pairs, trip, 0.5).loss; },
      in);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(LossGrad, UpstreamGradientScales) {
  Tensor a = test::randn({4, 3}, DType::F64, Device::cpu(), 11);
  Tensor p = test::randn({4, 3}, DType::F64, Device::cpu(), 12);
  Tensor n = test::randn({4, 3}, DType::F64, Device::cpu(), 13);
  ag::Variable va(a, true), vp(p, true), vn(n, true);
  TripletLossOptions o;
  o.margin = 100.0;  // every term active (squared distances of N(0,1) rows in 3-D are far below 100)
  LossOutput out = triplet_loss(va, vp, vn, o);
  out.loss.backward();
  Tensor g1 = va.grad().clone();
  va.zero_grad();
  LossOutput out2 = triplet_loss(va, vp, vn, o);
  out2.loss.backward(Tensor::full({}, 3.0, DType::F64));
  // The same arithmetic scaled by 3: exact up to one rounding per element.
  EXPECT_TRUE(test::all_close(g1.to_double_vector(), [&] {
    auto v = va.grad().to_double_vector();
    for (auto& x : v) x /= 3.0;
    return v;
  }(), 1e-14, 1e-12));
  EXPECT_EQ(out.host_stats().active, 4);
}
