// The final one-shot test reports per-alphabet accuracy (per Lake run for
// Lake's test) beside the mean, each with a 95 % Wilson score interval, in
// summary.json and report.md; --test-seed picks the --test-dir tasks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "experiments/common/json.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {

using namespace mn_test_exp;
using mn::exp::Json;

// The 95 % Wilson interval, written out (z = 1.96), in percent.
std::pair<double, double> wilson(double p, double n) {
  const double z = 1.959963984540054;
  const double c = (p + z * z / (2 * n)) / (1 + z * z / n);
  const double h = z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n);
  return {100 * (c - h), 100 * (c + h)};
}

void expect_interval(const Json& e, const std::string& what) {
  const double acc = e["accuracy_percent"].get<double>();
  const double n = e["trials"].get<double>();
  ASSERT_TRUE(e["accuracy_ci95_percent"].is_array()) << what;
  const double lo = e["accuracy_ci95_percent"][0].get<double>(), hi = e["accuracy_ci95_percent"][1].get<double>();
  auto [wlo, whi] = wilson(acc / 100.0, n);
  // summary.json holds metrics to 10 significant digits (metric_number).
  EXPECT_NEAR(lo, std::max(0.0, wlo), 1e-6) << what;
  EXPECT_NEAR(hi, std::min(100.0, whi), 1e-6) << what;
  EXPECT_LE(lo, acc) << what;
  EXPECT_GE(hi, acc) << what;
}

TEST(OneShotReport, PerAlphabetAccuracyWithIntervalsAndTheTestSeed) {
  TempDir out("oneshot"), cache("oneshotcache");
  const auto args = base_args(out.str(), cache.str()) +
                    std::vector<std::string>{"--iters", "2", "--batch", "4", "--epochs", "1", "--val-triplets", "12",
                                             "--val-tasks", "6", "--test-dir", omniglot_root() + "/images_evaluation",
                                             "--test-way", "5", "--test-tasks", "12", "--test-seed", "77"};
  ASSERT_EQ(run_study(StudyKind::Triplet, args).rc, 0);
  const Json sum = Json::parse(read_text(out / "summary.json"));
  ASSERT_TRUE(sum.contains("test_dir")) << sum.dump();
  const Json& t = sum["test_dir"];
  EXPECT_EQ(t["seed"].get<int64_t>(), 77);
  EXPECT_EQ(t["trials"].get<int64_t>(), 60);  // 12 tasks x 5 queries
  expect_interval(t, "mean");
  ASSERT_TRUE(t["per_alphabet"].is_array());
  EXPECT_GE(t["per_alphabet"].size(), 1u);
  EXPECT_LE(t["per_alphabet"].size(), 2u);  // the synthetic evaluation set has 2 alphabets
  int64_t trials = 0;
  double correct = 0;
  for (const auto& e : t["per_alphabet"]) {
    EXPECT_EQ(e["name"].get<std::string>().rfind("Evaluation_", 0), 0u) << e.dump();
    expect_interval(e, e["name"].get<std::string>());
    trials += e["trials"].get<int64_t>();
    correct += e["accuracy_percent"].get<double>() / 100.0 * e["trials"].get<double>();
  }
  EXPECT_EQ(trials, 60);
  EXPECT_NEAR(100.0 * correct / 60.0, t["accuracy_percent"].get<double>(), 1e-6);
  const std::string report = read_text(out / "report.md");
  EXPECT_NE(report.find("95 % CI"), std::string::npos) << report;
  EXPECT_NE(report.find("| alphabet |"), std::string::npos) << report;
  EXPECT_NE(report.find("--test-seed 77"), std::string::npos) << report;
  // The same seed evaluates the same tasks: --evaluate reproduces the numbers.
  TempDir ev("oneshotev");
  ASSERT_EQ(run_study(StudyKind::Triplet, {"--evaluate", out / "best.safetensors", "--out-dir", ev.str(),
                                           "--data-dir", omniglot_root(), "--cache-dir", cache.str(), "--device", "cpu",
                                           "--test-dir", omniglot_root() + "/images_evaluation", "--test-way", "5",
                                           "--test-tasks", "12", "--test-seed", "77"}).rc,
            0);
  const Json e = Json::parse(read_text(ev / "evaluation.json"));
  EXPECT_EQ(e["test_dir"]["per_alphabet"], t["per_alphabet"]);
}

}  // namespace
