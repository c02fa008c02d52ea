// The sampling study (experiments/sampling/): the study's miners against
// tuples enumerated by hand on a tiny batch, its tuple draws, its metrics
// (the offline-pair artefact included), and 2-epoch smoke runs of one online
// and one offline strategy on a small synthetic MNIST-layout folder, with an
// exact mid-epoch resume, bad flags, and a tiny grid with its results.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <vector>

#include "data/idx.h"
#include "experiments/sampling/data.h"
#include "experiments/sampling/eval.h"
#include "experiments/sampling/grid.h"
#include "experiments/sampling/study.h"
#include "kernels/miners.h"
#include "nn/checkpoint.h"
#include "tests/common/test_util.h"
#include "tests/experiments/omniglot_fixture.h"

using namespace mn;
using namespace mn::exp::sampling;
using mn_test_exp::read_lines;
using mn_test_exp::read_text;
using mn_test_exp::TempDir;
using mn_test_exp::without_fields;
namespace fs = std::filesystem;

namespace {

using Trip = std::array<int64_t, 3>;
using PairT = std::array<int64_t, 3>;  // i, j, is_pos

// Five points on a line, labels {0, 0, 0, 1, 1}; the study mines on SQUARED
// distances: d2(0,1) = 1, d2(0,2) = 9, d2(1,2) = 4, d2(3,4) = 7.84,
// d2(0,3) = 1.44, d2(0,4) = 16, d2(1,3) = 0.04, d2(1,4) = 9, d2(2,3) = 3.24, d2(2,4) = 1.
const double kX[5] = {0, 1, 3, 1.2, 4};
Tensor sq_dist() {
  std::vector<double> d(25);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j) d[i * 5 + j] = (kX[i] - kX[j]) * (kX[i] - kX[j]);
  return Tensor::from_vector(d, {5, 5});
}
Tensor tiny_labels() { return Tensor::from_vector(std::vector<int64_t>{0, 0, 0, 1, 1}, {5}); }

std::vector<Trip> trips(const Tensor& t) {
  auto v = t.to_vector<int64_t>();
  std::vector<Trip> r;
  for (size_t k = 0; k + 2 < v.size(); k += 3) r.push_back({v[k], v[k + 1], v[k + 2]});
  return r;
}

std::vector<Trip> mine(kernels::MinerKind kind, bool unordered, uint64_t seed = 3) {
  kernels::MinerParams p;
  p.kind = kind;
  p.margin = 1.0;
  p.unordered_positives = unordered;
  Generator g(seed);
  return trips(kernels::mine_triplets(sq_dist(), tiny_labels(), p, &g).triplets);
}

}  // namespace

TEST(SamplingMiners, AllTripletsTakeUnorderedPositivePairs) {
  // 2,700 = 9 C(25, 2) in the study: anchor-positive pairs are combinations.
  const std::vector<Trip> want{{0, 1, 3}, {0, 1, 4}, {0, 2, 3}, {0, 2, 4}, {1, 2, 3},
                               {1, 2, 4}, {3, 4, 0}, {3, 4, 1}, {3, 4, 2}};
  EXPECT_EQ(mine(kernels::MinerKind::AllTriplets, true), want);
  EXPECT_EQ(mine(kernels::MinerKind::AllTriplets, false).size(), 18u);  // ordered pairs: twice as many
}

TEST(SamplingMiners, RandomNegativeTakesOneViolatingNegativePerPair) {
  // d2(a,p) - d2(a,n) + 1 > 0: (0,1): only 3; (0,2): only 3; (1,2): only 3; (3,4): any of 0, 1, 2.
  std::set<int64_t> drawn;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    auto t = mine(kernels::MinerKind::RandomViolating, true, seed);
    ASSERT_EQ(t.size(), 4u);
    EXPECT_EQ(t[0], (Trip{0, 1, 3}));
    EXPECT_EQ(t[1], (Trip{0, 2, 3}));
    EXPECT_EQ(t[2], (Trip{1, 2, 3}));
    EXPECT_EQ(t[3][0], 3);
    EXPECT_EQ(t[3][1], 4);
    drawn.insert(t[3][2]);
  }
  EXPECT_EQ(drawn, (std::set<int64_t>{0, 1, 2}));  // uniform among the violating ones: all three appear
}

TEST(SamplingMiners, SemiHardTakesOnlyTheBand) {
  // d2(a,p) < d2(a,n) < d2(a,p) + 1 holds only for (0, 1, 3): 1 < 1.44 < 2.
  EXPECT_EQ(mine(kernels::MinerKind::RandomSemiHard, true), (std::vector<Trip>{{0, 1, 3}}));
}

TEST(SamplingMiners, PairMinersTakeAllPositivesAndAsManyNegatives) {
  Generator g(5);
  auto hard = kernels::mine_pairs(sq_dist(), tiny_labels(), kernels::PairNegatives::Hardest, &g);
  auto pv = hard.pairs.to_vector<int64_t>(), pos = hard.is_pos.to_vector<int64_t>();
  std::vector<PairT> got;
  for (size_t k = 0; k < pos.size(); ++k) got.push_back({pv[2 * k], pv[2 * k + 1], pos[k]});
  // Positives (0,1), (0,2), (1,2), (3,4); the four nearest negatives: d2 0.04 (1,3), 1 (2,4),
  // 1.44 (0,3), 3.24 (2,3), listed in (i, j) order.
  const std::vector<PairT> want{{0, 1, 1}, {0, 2, 1}, {1, 2, 1}, {3, 4, 1}, {0, 3, 0}, {1, 3, 0}, {2, 3, 0}, {2, 4, 0}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(hard.num_pos, 4);
  std::set<std::pair<int64_t, int64_t>> seen;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Generator gr(seed);
    auto rnd = kernels::mine_pairs(sq_dist(), tiny_labels(), kernels::PairNegatives::Random, &gr);
    auto v = rnd.pairs.to_vector<int64_t>();
    ASSERT_EQ(rnd.num_pos, 4);
    ASSERT_EQ(v.size(), 16u);
    std::set<std::pair<int64_t, int64_t>> negs;
    for (int k = 4; k < 8; ++k) {
      EXPECT_LT(v[2 * k], v[2 * k + 1]);
      EXPECT_NE(v[2 * k] < 3, v[2 * k + 1] < 3) << "a negative pair mixes the classes";
      negs.insert({v[2 * k], v[2 * k + 1]});
      seen.insert({v[2 * k], v[2 * k + 1]});
    }
    EXPECT_EQ(negs.size(), 4u) << "four distinct negatives";
  }
  EXPECT_EQ(seen.size(), 6u) << "every negative pair is drawn sometimes";
}

// ------------------------------------------------------------------ data --
TEST(SamplingData, BalancedBatchesAreClassGroupedAndDistinct) {
  std::vector<int32_t> y;
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 7 + c; ++i) y.push_back(c);
  std::vector<int64_t> subset;
  for (size_t i = 0; i < y.size(); ++i)
    if (y[i] != 2) subset.push_back(static_cast<int64_t>(i));
  Generator g(1);
  auto b = balanced_batches(y, subset, 3, 3, 20, g);
  ASSERT_EQ(b.size(), 20u);
  for (const auto& batch : b) {
    ASSERT_EQ(batch.size(), 9u);
    std::set<int32_t> classes;
    for (int c = 0; c < 3; ++c) {
      std::set<int64_t> imgs;
      for (int k = 0; k < 3; ++k) {
        const int64_t i = batch[c * 3 + k];
        EXPECT_EQ(y[i], y[batch[c * 3]]) << "a class block mixes classes";
        EXPECT_NE(y[i], 2) << "an index outside the subset";
        imgs.insert(i);
      }
      EXPECT_EQ(imgs.size(), 3u) << "K distinct images per class";
      classes.insert(y[batch[c * 3]]);
    }
    EXPECT_EQ(classes.size(), 3u) << "P distinct classes";
  }
  Generator g2(1);
  EXPECT_EQ(balanced_batches(y, subset, 3, 3, 20, g2), b) << "a seed reproduces the batches";
}

TEST(SamplingData, OfflineTuplesFollowTheirDefinitions) {
  std::vector<int32_t> y;
  for (int i = 0; i < 300; ++i) y.push_back(i % 5);
  Generator g(2);
  OfflinePlan p = offline_pairs(y, g);
  ASSERT_EQ(p.order.size(), 300u);
  std::vector<int64_t> sorted = p.order;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 300; ++i) ASSERT_EQ(sorted[i], i) << "one tuple per image";
  int same = 0;
  for (size_t k = 0; k < 300; ++k) {
    if (p.same[k]) {
      EXPECT_EQ(y[p.order[k]], y[p.partner[k]]);
      EXPECT_NE(p.order[k], p.partner[k]);
      ++same;
    } else {
      EXPECT_NE(y[p.order[k]], y[p.partner[k]]);
    }
  }
  EXPECT_GT(same, 110);  // p = 0.5 of 300: far outside 110..190 would be a bug
  EXPECT_LT(same, 190);
  OfflinePlan t = offline_triplets(y, g);
  for (size_t k = 0; k < 300; ++k) {
    EXPECT_EQ(y[t.order[k]], y[t.partner[k]]);
    EXPECT_NE(t.order[k], t.partner[k]);
    EXPECT_NE(y[t.order[k]], y[t.negative[k]]);
  }
}

TEST(SamplingData, OfflinePairMetricDependsOnlyOnTheSetSize) {
  // The study's code: per batch of 128 fixed pairs (positives first), negatives
  // with d > 0 over 64, averaged. Expected from the sizes alone, for any
  // embedding in which no negative pair coincides.
  for (int64_t n : {10000, 9020, 9000, 1000}) {
    std::vector<int32_t> y;
    for (int64_t i = 0; i < n; ++i) y.push_back(static_cast<int32_t>((i * 7) % 10));
    std::vector<int64_t> all(n);
    for (int64_t i = 0; i < n; ++i) all[i] = i;
    FixedPairs p = fixed_test_pairs(y, all, 29);
    ASSERT_EQ(static_cast<int64_t>(p.a.size()), n);
    const int64_t npos = (n + 1) / 2;
    for (int64_t k = 0; k < n; ++k) ASSERT_EQ(p.same[k], k < npos ? 1 : 0) << "positives first";
    double want = 0;
    int64_t batches = 0;
    for (int64_t s = 0; s < n; s += 128, ++batches) {
      const int64_t e = std::min(n, s + 128);
      want += static_cast<double>(std::max<int64_t>(0, e - std::max(s, npos))) / 64.0;
    }
    want /= static_cast<double>(batches);
    for (uint64_t seed : {1u, 2u}) {  // two different "models": random embeddings
      HostEmb emb;
      emb.n = n;
      emb.d = 2;
      Generator g(seed);
      for (int64_t i = 0; i < 2 * n; ++i) emb.v.push_back(static_cast<float>(g.next_normal()));
      EXPECT_NEAR(study_offline_pair_accuracy(emb, p), want, 1e-12) << n;
    }
    if (n == 10000) {
      EXPECT_NEAR(100 * want, 98.89, 0.005) << "the study's printed Test10 value";
    }
  }
}

// --------------------------------------------------------------- metrics --
TEST(SamplingEval, KnnRecallAndAurocOnHandMadeEmbeddings) {
  HostEmb g;
  g.d = 1;
  // Gallery: class 0 at 0..4, class 1 at 10..14.
  std::vector<int32_t> gl;
  for (int i = 0; i < 5; ++i) {
    g.v.push_back(static_cast<float>(i));
    gl.push_back(0);
  }
  for (int i = 0; i < 5; ++i) {
    g.v.push_back(static_cast<float>(10 + i));
    gl.push_back(1);
  }
  g.n = 10;
  HostEmb q;
  q.d = 1;
  q.v = {1.0f, 13.0f, 6.0f, 30.0f};  // nearest: class 0, class 1, class 0 (6 vs 10), class 1
  q.n = 4;
  std::vector<int32_t> ql{0, 1, 1, 2};
  KnnResult r = knn_accuracy(g, gl, q, ql, {0, 1, 2});
  EXPECT_NEAR(r.acc1, 2.0 / 3.0, 1e-12);  // 6.0 is nearer to 4 (class 0) than to 10
  // 5-NN of 6.0: 4, 3, 2 (class 0) and 10, 11 (class 1): majority class 0 -> wrong too.
  EXPECT_NEAR(r.acc5, 2.0 / 3.0, 1e-12);
  // Recall@1 over the gallery itself: every point's nearest other point shares its class.
  EXPECT_DOUBLE_EQ(recall_at_1(g, gl), 1.0);
  // The unseen class 2 far from both centroids (2 and 12): perfect separation.
  EXPECT_DOUBLE_EQ(unseen_auroc(g, gl, q, ql, 2), 1.0);
  // Unseen placed at a centroid: scored below every seen query -> AUROC 0.
  q.v[3] = 2.0f;
  EXPECT_DOUBLE_EQ(unseen_auroc(g, gl, q, ql, 2), 0.0);
}

// ---------------------------------------------------------- study runs --
namespace {

// A small MNIST-layout folder: 10 classes, 20 training and 8 test images each;
// class c is a bright 6x6 square at a class-specific place plus noise.
const std::string& synthetic_mnist() {
  static TempDir dir("sampling_data");
  static const std::string path = dir.str();
  static bool written = false;
  if (!written) {
    fs::create_directories(dir.path / "mnist");
    auto write = [&](const std::string& split, int per_class, uint64_t seed) {
      Generator g(seed);
      std::vector<uint8_t> px, lab;
      for (int i = 0; i < per_class * 10; ++i) {
        const int c = i % 10, r0 = 3 + (c / 5) * 12 + static_cast<int>(g.next_int(0, 3)),
                  c0 = 2 + (c % 5) * 5 + static_cast<int>(g.next_int(0, 2));
        for (int r = 0; r < 28; ++r)
          for (int k = 0; k < 28; ++k) {
            const bool on = r >= r0 && r < r0 + 6 && k >= c0 && k < c0 + 6;
            px.push_back(static_cast<uint8_t>(on ? 200 + g.next_int(0, 55) : g.next_int(0, 40)));
          }
        lab.push_back(static_cast<uint8_t>(c));
      }
      const int n = per_class * 10;
      data::write_idx((dir.path / "mnist" / (split + "-images-idx3-ubyte")).string(), 2051, {n, 28, 28}, px);
      data::write_idx((dir.path / "mnist" / (split + "-labels-idx1-ubyte")).string(), 2049, {n}, lab);
    };
    write("train", 20, 11);
    write("t10k", 8, 12);
    written = true;
  }
  return path;
}

int run_sampling(std::vector<std::string> args, std::string* err = nullptr) {
  args.insert(args.begin(), "sampling");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  if (err) testing::internal::CaptureStderr();
  const int rc = mn::exp::run_study(make_sampling_study(), static_cast<int>(argv.size()), argv.data());
  if (err) *err = testing::internal::GetCapturedStderr();
  return rc;
}

std::vector<std::string> small(const std::string& out, const std::string& strategy) {
  std::vector<std::string> a{"--data-dir", synthetic_mnist(), "--out-dir", out, "--device", "cpu", "--strategy",
                             strategy, "--epochs", "2", "--eval-batch", "64"};
  if (strategy.find("online") != std::string::npos) a.insert(a.end(), {"--classes-per-batch", "3", "--per-class", "5"});
  else a.insert(a.end(), {"--batch", "16"});
  return a;
}

double summary_number(const std::string& dir, const std::string& key) {
  mn::exp::Json j = mn::exp::Json::parse(read_text(dir + "/summary.json"));
  const mn::exp::Json* s = &j["sampling"];
  std::string rest = key;  // "untrained.knn1_acc_test9" walks into the untrained block
  for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1)) {
    const std::string part = rest.substr(0, dot);
    if (!s->contains(part)) return NAN;
    s = &(*s)[part];
  }
  return s->contains(rest) && (*s)[rest].is_number() ? (*s)[rest].get<double>() : NAN;
}

// Two runs ended with the same weights, optimizer state and per-epoch metrics
// (timings aside).
void expect_same_sampling_run(const TempDir& a, const TempDir& b) {
  auto fa = nn::read_safetensors(a / "last.safetensors"), fb = nn::read_safetensors(b / "last.safetensors");
  ASSERT_EQ(fa.tensors.size(), fb.tensors.size());
  for (const auto& [name, t] : fa.tensors)
    EXPECT_EQ(t.to_double_vector(), fb.tensors.at(name).to_double_vector()) << name;
  auto la = read_lines(a / "metrics.jsonl"), lb = read_lines(b / "metrics.jsonl");
  ASSERT_EQ(la.size(), lb.size());
  const std::vector<std::string> timing{"train_seconds", "val_seconds", "images_per_second"};
  for (size_t i = 0; i < la.size(); ++i) EXPECT_EQ(without_fields(la[i], timing), without_fields(lb[i], timing));
}

}  // namespace

TEST(SamplingStudy, TwoEpochSmokeRunsOnlineAndOffline) {
  for (const char* strategy : {"all-positive-online-pair", "random-offline-triplet"}) {
    SCOPED_TRACE(strategy);
    TempDir out("sampling_smoke");
    auto args = small(out.str(), strategy);
    args.insert(args.end(), {"--lr-step-epochs", "2"});
    ASSERT_EQ(run_sampling(args), 0);
    auto lines = read_lines(out / "metrics.jsonl");
    ASSERT_EQ(lines.size(), 2u);
    // The study's StepLR stepped at the start of each epoch: epoch e trains with
    // 0.1^floor(e / step), so with step 2 the second epoch already has 1e-4.
    EXPECT_DOUBLE_EQ(mn_test_exp::json_field(lines[0], "lr"), 1e-3);
    EXPECT_NEAR(mn_test_exp::json_field(lines[1], "lr"), 1e-4, 1e-12);
    for (const char* k : {"study_acc_test10", "study_acc_test9", "couple_acc_test10", "knn1_acc_test9",
                          "knn5_acc_test9", "recall1_test10", "unseen_auroc", "tuples_per_batch", "test_ms"}) {
      const double v = summary_number(out.str(), k);
      EXPECT_TRUE(std::isfinite(v)) << k;
      EXPECT_GE(v, 0) << k;
    }
    EXPECT_EQ(summary_number(out.str(), "train_images"), 180);  // 200 minus class 0
    // The untrained net's value of every metric that can fail, beside the
    // trained one, so the report shows what training added.
    for (const char* k : {"couple_acc_test10", "couple_acc_test9", "knn1_acc_test9", "knn5_acc_test9",
                          "recall1_test10", "unseen_auroc"}) {
      const double v = summary_number(out.str(), std::string("untrained.") + k);
      EXPECT_TRUE(std::isfinite(v)) << "untrained." << k << "\n" << read_text(out / "summary.json");
    }
    // Squares at ten distinct places: two epochs separate the classes well above chance (11 %).
    EXPECT_GT(summary_number(out.str(), "knn1_acc_test9"), 60) << read_text(out / "report.md");
    EXPECT_EQ(summary_number(out.str(), "tuples_per_batch"),
              std::string(strategy).find("online") != std::string::npos ? 2 * 3 * 10 : 16.0 * 11 / 12 + 4.0 / 12)
        << "online: 3 C(5, 2) = 30 positives + 30 negatives; offline: 11 full batches of 16 and one of 4";
    EXPECT_TRUE(fs::exists(out / "embedding_before.png") || fs::exists(out / "embedding_before.png.gp"));
    EXPECT_TRUE(fs::exists(out / "embedding_after.png") || fs::exists(out / "embedding_after.png.gp"));
  }
}

TEST(SamplingStudy, MidEpochResumeIsExact) {
  TempDir a("sampling_a"), b("sampling_b");
  const auto args_a = small(a.str(), "random-negative-online-triplet");
  ASSERT_EQ(run_sampling(args_a), 0);
  auto args_b = small(b.str(), "random-negative-online-triplet");
  auto stop = args_b;
  stop.insert(stop.end(), {"--stop-after", "17"});  // epoch 2, step 5 of 12
  ASSERT_EQ(run_sampling(stop), mn::exp::kExitResumable);
  auto resume = args_b;
  resume.push_back("--resume");
  ASSERT_EQ(run_sampling(resume), 0);
  expect_same_sampling_run(a, b);
  EXPECT_EQ(summary_number(a.str(), "knn1_acc_test9"), summary_number(b.str(), "knn1_acc_test9"));
  EXPECT_EQ(summary_number(a.str(), "study_acc_test10"), summary_number(b.str(), "study_acc_test10"));
}

// Every allocation handed out full of NaN bytes (MN_POISON, runtime/allocator.h)
// must change nothing, for every strategy: no kernel, miner, loss or metric of a
// run may read memory it did not write (the bug class of an unwritten stats
// buffer, which reads whatever the recycled block held).
TEST(SamplingStudy, PoisonedAllocationsChangeNothing) {
  for (const char* strategy : {"random-offline-pair", "hard-negative-online-pair", "all-positive-online-pair",
                               "random-offline-triplet", "all-positive-online-triplet",
                               "random-negative-online-triplet", "semi-hard-negative-online-triplet"}) {
    SCOPED_TRACE(strategy);
    TempDir a("sampling_clean"), b("sampling_poisoned");
    auto args_a = small(a.str(), strategy), args_b = small(b.str(), strategy);
    for (auto* args : {&args_a, &args_b}) *(std::find(args->begin(), args->end(), "--epochs") + 1) = "1";
    int rc_a = -1, rc_b = -1;
    {
      test::PoisonScope off(false);
      rc_a = run_sampling(args_a);
    }
    {
      test::PoisonScope on(true);
      rc_b = run_sampling(args_b);
    }
    ASSERT_EQ(rc_a, 0);
    ASSERT_EQ(rc_b, 0);
    expect_same_sampling_run(a, b);
    for (const char* k : {"study_acc_test10", "couple_acc_test10", "knn1_acc_test9", "recall1_test10", "unseen_auroc"})
      EXPECT_EQ(summary_number(a.str(), k), summary_number(b.str(), k)) << k;
  }
}

TEST(SamplingStudy, BadFlagsNameTheFlag) {
  TempDir out("sampling_bad");
  std::string err;
  auto args = small(out.str(), "all-positive-online-pair");
  args.insert(args.end(), {"--batch", "64"});
  EXPECT_EQ(run_sampling(args, &err), mn::exp::kExitUsage);
  EXPECT_NE(err.find("--batch"), std::string::npos) << err;
  args = small(out.str(), "random-offline-pair");
  args.insert(args.end(), {"--per-class", "4"});
  EXPECT_EQ(run_sampling(args, &err), mn::exp::kExitUsage);
  EXPECT_NE(err.find("--per-class"), std::string::npos) << err;
  EXPECT_EQ(run_sampling({"--data-dir", (out / "nowhere"), "--out-dir", out.str()}, &err), mn::exp::kExitUsage);
  EXPECT_NE(err.find("--data-dir"), std::string::npos) << err;
  EXPECT_EQ(run_sampling({"--strategy", "hardest", "--out-dir", out.str()}, &err), mn::exp::kExitUsage);
  EXPECT_NE(err.find("semi-hard-negative-online-triplet"), std::string::npos) << "lists the valid names: " << err;
  EXPECT_FALSE(fs::exists(out / "metrics.jsonl")) << "nothing trained";
}

TEST(SamplingGrid, RunsCellsSkipsFinishedOnesAndWritesTheTables) {
  TempDir out("sampling_grid");
  auto grid = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"sampling_grid", "--out-dir", out.str(), "--datasets", "mnist", "--strategies",
                                  "random-offline-pair,all-positive-online-triplet", "--data-dir", synthetic_mnist(),
                                  "--device", "cpu", "--epochs", "1", "--per-class", "15"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return run_grid(static_cast<int>(argv.size()), argv.data());
  };
  ASSERT_EQ(grid({}), 0);
  const std::string md = read_text(out / "results.md");
  EXPECT_NE(md.find("| Random Offline Pair |"), std::string::npos);
  EXPECT_NE(md.find("(98.89)"), std::string::npos) << "the study's numbers beside ours";
  EXPECT_NE(md.find("cells finished: 2 of 2"), std::string::npos) << md;
  const std::string cell = out / "mnist/random-offline-pair/seed1/summary.json";
  ASSERT_TRUE(fs::exists(cell));
  const auto before = fs::last_write_time(cell);
  ASSERT_EQ(grid({}), 0);  // finished cells are skipped
  EXPECT_EQ(fs::last_write_time(cell), before);
  EXPECT_NE(read_text(out / "results.json").find("\"all-positive-online-triplet\""), std::string::npos);
  std::vector<std::string> bad{"sampling_grid", "--datasets", "emnist", "--out-dir", out.str()};
  std::vector<char*> argv;
  for (auto& a : bad) argv.push_back(a.data());
  EXPECT_EQ(run_grid(static_cast<int>(argv.size()), argv.data()), mn::exp::kExitUsage);
}
