// Lake's one-shot runs: parsing, position-independent scoring, the MHD
// definition against a brute-force loop, and the 38.8 % MHD baseline.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "data/image_io.h"
#include "data/lake_runs.h"
#include "data_test_util.h"

using namespace mn;
using namespace mn::data;
namespace fs = std::filesystem;

TEST(DataLakeRuns, ScoreTrialIgnoresPosition) {
  // Random cost rows with deliberate ties; permuting candidates (and the truth
  // index with them) must give the same score.
  std::mt19937 rng(3);
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<double> row(20);
    for (auto& v : row) v = static_cast<double>(rng() % 6);  // many ties
    int truth = static_cast<int>(rng() % 20);
    double s = score_trial(row.data(), 20, truth, ScoreKind::Cost);
    // Direct definition: 0 if anything is strictly lower, else 1/(#equal).
    int lower = 0, equal = 0;
    for (double v : row) lower += v < row[truth], equal += v == row[truth];
    EXPECT_DOUBLE_EQ(s, lower ? 0.0 : 1.0 / equal);
    std::vector<int> p(20);
    for (int i = 0; i < 20; ++i) p[i] = i;
    std::shuffle(p.begin(), p.end(), rng);
    std::vector<double> prow(20);
    int ptruth = -1;
    for (int i = 0; i < 20; ++i) {
      prow[i] = row[p[i]];
      if (p[i] == truth) ptruth = i;
    }
    EXPECT_DOUBLE_EQ(score_trial(prow.data(), 20, ptruth, ScoreKind::Cost), s);
    std::vector<double> neg(20);
    for (int i = 0; i < 20; ++i) neg[i] = -row[i];
    EXPECT_DOUBLE_EQ(score_trial(neg.data(), 20, truth, ScoreKind::Similarity), s);
  }
}

TEST(DataLakeRuns, MhdMatchesBruteForce) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-10, 10);
  std::vector<double> a(2 * 17), b(2 * 23);
  for (auto& v : a) v = u(rng);
  for (auto& v : b) v = u(rng);
  auto directed = [](const std::vector<double>& x, const std::vector<double>& y) {
    double s = 0;
    for (size_t i = 0; i < x.size() / 2; ++i) {
      double m = 1e300;
      for (size_t j = 0; j < y.size() / 2; ++j)
        m = std::min(m, std::hypot(x[2 * i] - y[2 * j], x[2 * i + 1] - y[2 * j + 1]));
      s += m;
    }
    return s / (x.size() / 2);
  };
  double ref = std::max(directed(a, b), directed(b, a));
  EXPECT_NEAR(modified_hausdorff(a, b), ref, 1e-12);  // only summation order differs
  EXPECT_NEAR(modified_hausdorff(b, a), ref, 1e-12);
  EXPECT_TRUE(std::isinf(modified_hausdorff({}, b)));
  // Centring: a shifted copy of an image has distance 0.
  Tensor im = Tensor::full({20, 20}, 255, DType::U8), sh = Tensor::full({20, 20}, 255, DType::U8);
  for (int k = 2; k < 9; ++k) {
    im.data<uint8_t>()[k * 20 + 3] = 0;
    sh.data<uint8_t>()[(k + 5) * 20 + 10] = 0;
  }
  EXPECT_NEAR(mhd_images(im, sh), 0.0, 1e-12);
}

namespace {
// Fixture: 2 runs x 3 trials, candidates are distinct glyphs, each query a copy
// of its candidate with one pixel changed; class_labels.txt in shuffled order.
void make_runs(const test::TempDir& d) {
  for (int r = 1; r <= 2; ++r) {
    char rn[8];
    std::snprintf(rn, sizeof rn, "run%02d", r);
    fs::create_directories(d / (std::string(rn) + "/training"));
    fs::create_directories(d / (std::string(rn) + "/test"));
    std::ofstream lab(d / (std::string(rn) + "/class_labels.txt"));
    int map[3] = {2, 0, 1};  // item k matches class map[k]
    for (int k = 0; k < 3; ++k) {
      GrayImage g;
      g.height = g.width = 6;
      g.pixels.assign(36, 255);
      for (int i = 0; i <= k * 3 + r; ++i) g.pixels[i] = 0;
      char p[64];
      std::snprintf(p, sizeof p, "%s/training/class%02d.png", rn, k + 1);
      write_png_gray(d / p, g, true);
    }
    for (int k = 0; k < 3; ++k) {
      GrayImage g;
      g.height = g.width = 6;
      g.pixels.assign(36, 255);
      for (int i = 0; i <= map[k] * 3 + r; ++i) g.pixels[i] = 0;
      g.pixels[35] = 0;
      char p[64];
      std::snprintf(p, sizeof p, "%s/test/item%02d.png", rn, k + 1);
      write_png_gray(d / p, g, true);
    }
    for (int k : {2, 0, 1})
      lab << rn << "/test/item" << "0" << k + 1 << ".png " << rn << "/training/class0" << map[k] + 1
          << ".png\n";
  }
}
double l1(const Tensor& a, const Tensor& b) {
  auto x = a.contiguous().to_vector<uint8_t>(), y = b.contiguous().to_vector<uint8_t>();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += std::abs(int(x[i]) - int(y[i]));
  return s;
}
}  // namespace

TEST(DataLakeRuns, ParsesFixtureAndScores) {
  test::TempDir d;
  make_runs(d);
  auto runs = load_lake_runs(d.path.string(), 2);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].answer, (std::vector<int32_t>{2, 0, 1}));
  EXPECT_EQ(runs[1].query_files[0], "run02/test/item01.png");
  OneShotResult r = evaluate_lake_runs(runs, l1, ScoreKind::Cost);
  EXPECT_EQ(r.trials, 6);
  EXPECT_DOUBLE_EQ(r.error_percent, 0.0);
  // A constant function ties everything: expected error 1 - 1/3, whatever the order.
  r = evaluate_lake_runs(runs, [](const Tensor&, const Tensor&) { return 1.0; }, ScoreKind::Cost);
  EXPECT_NEAR(r.error_percent, 100.0 * 2.0 / 3.0, 1e-9);
  EXPECT_EQ(r.ties, 6);
}

TEST(DataLakeRuns, BadInput) {
  test::TempDir d;
  EXPECT_MN_ERROR(load_lake_runs(d / "none"), "none", "missing folder");
  make_runs(d);
  EXPECT_MN_ERROR(load_lake_runs(d.path.string(), 20), "2 run folders", "expected 20");
  {
    std::ofstream f(d / "run01/class_labels.txt");
    f << "run01/test/item01.png\n";
  }
  EXPECT_MN_ERROR(load_lake_runs(d.path.string(), 2), "class_labels.txt", "expected two paths");
}

class DataLakeRealRuns : public ::testing::Test {};

TEST(DataLakeRealRuns, MhdBaselineIs38Point8AndPermutationInvariant) {
  MN_SKIP_IF_NO_DATA(dir, "omniglot/all_runs");
  auto runs = load_lake_runs(dir);
  ASSERT_EQ(runs.size(), 20u);
  int64_t trials = 0;
  for (auto& r : runs) trials += static_cast<int64_t>(r.answer.size());
  EXPECT_EQ(trials, 400);
  OneShotResult r = evaluate_lake_runs_batched(runs, mhd_matrix, ScoreKind::Cost);
  std::printf("MHD one-shot error on Lake's 20 runs: %.2f %% (ties %lld)\n", r.error_percent,
              static_cast<long long>(r.ties));
  // Lake et al. report 38.8 % (155 of 400 wrong = 38.75 %, printed 38.8).
  EXPECT_NEAR(r.error_percent, 38.8, 0.05 + 1e-9);
  ASSERT_EQ(r.group_error_percent.size(), 20u);
  double mean = 0;
  for (double e : r.group_error_percent) mean += e / 20;
  EXPECT_NEAR(mean, r.error_percent, 1e-9);  // equal-sized runs: mean of runs = pooled

  // Reverse and rotate every run's candidates: identical result.
  std::vector<LakeRun> perm = runs;
  for (auto& run : perm) {
    const int64_t C = run.candidates.size(0);
    std::vector<int64_t> p(C);  // new position k holds old candidate p[k]
    for (int64_t k = 0; k < C; ++k) p[k] = (C - 1 - k + 7) % C;
    Tensor c = Tensor::empty(run.candidates.shape(), DType::U8);
    std::vector<int32_t> inv(C);
    for (int64_t k = 0; k < C; ++k) {
      c.select(0, k).copy_(run.candidates.select(0, p[k]));
      inv[p[k]] = static_cast<int32_t>(k);
    }
    run.candidates = c;
    for (auto& a : run.answer) a = inv[a];
  }
  OneShotResult rp = evaluate_lake_runs_batched(perm, mhd_matrix, ScoreKind::Cost);
  EXPECT_DOUBLE_EQ(rp.error_percent, r.error_percent);
  EXPECT_EQ(rp.group_error_percent, r.group_error_percent);
}
