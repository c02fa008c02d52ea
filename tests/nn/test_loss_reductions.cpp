// MeanNonZero divides the summed loss by the number of terms with a loss > 0,
// as pml's AvgNonZeroReducer: for hinge losses that is the number of violating
// triplets, for the soft-margin loss (every term > 0) all of them. Values
// computed by hand on 1-D embeddings (kernels/losses.h documents the kinds).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nn/losses/losses.h"

namespace {

using namespace mn;

// Three triplets of 1-D points: (a, p, n) = (0, 1, 3), (0, 2, 1), (0, 1, 1.5).
struct Batch {
  ag::Variable a, p, n;
  Batch()
      : a(Tensor::from_vector(std::vector<double>{0, 0, 0}, {3, 1}), true),
        p(Tensor::from_vector(std::vector<double>{1, 2, 1}, {3, 1}), true),
        n(Tensor::from_vector(std::vector<double>{3, 1, 1.5}, {3, 1}), true) {}
};

double softplus(double x) { return std::log1p(std::exp(x)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(LossReductions, SoftMarginMeanNonZeroIsTheMeanOfAllTerms) {
  Batch b;
  nn::TripletLossOptions o;
  o.kind = nn::TripletKind::SoftMargin;  // plain L2: dp - dn + m = -1.8, 1.2, -0.3
  o.margin = 0.2;
  o.reduction = nn::Reduction::MeanNonZero;
  nn::LossOutput out = nn::triplet_loss(b.a, b.p, b.n, o);
  const double want = (softplus(-1.8) + softplus(1.2) + softplus(-0.3)) / 3.0;
  EXPECT_NEAR(out.host_stats().loss, want, 1e-12);
  EXPECT_EQ(out.host_stats().active, 1.0);  // the stat still counts violating triplets
  out.loss.backward();
  // d/dp of the second term: sigmoid(1.2) * d|p - a|/dp = sigmoid(1.2), over 3 terms.
  EXPECT_NEAR(b.p.grad().to_vector<double>()[1], sigmoid(1.2) / 3.0, 1e-12);
  nn::TripletLossOptions mean = o;
  mean.reduction = nn::Reduction::Mean;
  EXPECT_NEAR(nn::triplet_loss(b.a, b.p, b.n, mean).host_stats().loss, want, 1e-12);
}

TEST(LossReductions, HingeMeanNonZeroDividesByTheViolatingTriplets) {
  Batch b;
  nn::TripletLossOptions o;
  o.kind = nn::TripletKind::Schroff;  // squared: dp - dn + m = -7.8, 3.2, -1.05
  o.margin = 0.2;
  o.reduction = nn::Reduction::MeanNonZero;
  nn::LossOutput out = nn::triplet_loss(b.a, b.p, b.n, o);
  EXPECT_NEAR(out.host_stats().loss, 3.2, 1e-12);
  EXPECT_EQ(out.host_stats().active, 1.0);
  // Exactly at the margin (dp - dn + m = 0): no loss, inactive (strict boundary).
  ag::Variable a(Tensor::from_vector(std::vector<double>{0}, {1, 1})),
      p(Tensor::from_vector(std::vector<double>{1}, {1, 1})), n(Tensor::from_vector(std::vector<double>{1.5}, {1, 1}));
  nn::TripletLossOptions edge = o;
  edge.margin = 1.25;  // dn - dp = 2.25 - 1
  nn::LossOutput e = nn::triplet_loss(a, p, n, edge);
  EXPECT_EQ(e.host_stats().loss, 0.0);
  EXPECT_EQ(e.host_stats().active, 0.0);
}

}  // namespace
