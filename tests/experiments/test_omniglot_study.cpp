// End-to-end tests of the Omniglot studies (experiments/omniglot/omniglot_study.h)
// on a small synthetic Omniglot-layout folder, on the CPU:
//   * smoke runs of the triplet and siamese studies (the loss falls, one-shot
//     validation accuracy beats chance, summary.json is written);
//   * checkpoint round trip of a TripletNet (bit-identical embeddings);
//   * --resume gives the same weights and metrics as an uninterrupted run;
//   * one-shot scoring of a trained-style model is invariant to candidate order;
//   * --help, bad flags, a missing data folder, --config, and a NaN loss.
//
// The fixture (omniglot_fixture.h): images_background/ (4 alphabets x 6 characters x 6 drawers) and
// images_evaluation/ (2 alphabets x 8 characters x 6 drawers) of 105x105 1-bit
// PNGs. Each character is a distinct glyph (three thick strokes whose end points
// are drawn from a generator seeded by the character), each drawer perturbs the
// end points and shifts the glyph by a few pixels, so the classes are learnable
// and one-shot tasks are non-trivial. No all_runs/ folder: the driver then
// skips Lake's final test (tested in tests/data against Lake's layout).
#include <gtest/gtest.h>

#include "runtime/allocator.h"
#include "runtime/upload.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "data/image_io.h"
#include "data/lake_runs.h"
#include "data/omniglot.h"
#include "data/tasks.h"
#include "experiments/omniglot/omniglot_study.h"
#include "experiments/common/json.h"
#include "tests/experiments/omniglot_fixture.h"
#include "nn/checkpoint.h"
#include "nn/models/koch.h"
#include "runtime/parallel.h"
#include "runtime/rng.h"
#include "tests/common/test_util.h"


namespace {

using namespace mn_test_exp;

// ----------------------------------------------------------- smoke tests --
// The triplet study learns on the synthetic data: the epoch loss falls and
// one-shot validation accuracy beats chance (20 % for 5-way) by a wide margin.
TEST(OmniglotStudy, TripletSmokeLearnsOnSyntheticData) {
  TempDir out("tri"), cache("cache");
  auto args = base_args(out.str(), cache.str()) +
              std::vector<std::string>{"--epochs", "3", "--iters", "10", "--batch", "8", "--val-triplets", "50",
                                       "--val-tasks", "40", "--lr", "1e-3"};
  RunResult r = run_study(StudyKind::Triplet, args);
  ASSERT_EQ(r.rc, 0);
  auto lines = read_lines(out / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(json_field(lines[i], "epoch"), double(i + 1));
  const double first = json_field(lines.front(), "train_loss"), last = json_field(lines.back(), "train_loss");
  ASSERT_TRUE(std::isfinite(first) && std::isfinite(last));
  EXPECT_LT(last, first) << "training loss did not fall";
  // Chance is 100/5 = 20 %; 40 tasks give a binomial std of ~6.3 % at chance, so
  // 45 % is about 4 std above it.
  const double acc = json_field(lines.back(), "val_one_shot_percent");
  EXPECT_GT(acc, 45.0) << lines.back();
  EXPECT_GT(json_field(lines.back(), "val_verification_percent"), 50.0);
  EXPECT_TRUE(fs::exists(out / "summary.json"));
  EXPECT_TRUE(fs::exists(out / "last.safetensors"));
  EXPECT_TRUE(fs::exists(out / "best.safetensors"));
  const std::string summary = read_text(out / "summary.json");
  EXPECT_NE(summary.find("best_val_one_shot_percent"), std::string::npos) << summary;

  // --evaluate rebuilds the architecture from the checkpoint's metadata (no
  // --width/--embedding given) and scores N-way tasks from --test-dir.
  TempDir ev("eval");
  RunResult e = run_study(StudyKind::Triplet,
                          {"--evaluate", out / "best.safetensors", "--data-dir", omniglot_root(), "--out-dir", ev.str(),
                           "--cache-dir", cache.str(), "--device", "cpu", "--test-dir",
                           omniglot_root() + "/images_evaluation", "--test-way", "5", "--test-tasks", "10"});
  ASSERT_EQ(e.rc, 0);
  const std::string evaluation = read_text(ev / "evaluation.json");
  EXPECT_NE(evaluation.find("\"test_dir\""), std::string::npos) << evaluation;
  // LakeKoch tasks: 5 queries per task; accuracy well above the 20 % of chance.
  // (Parsed: the per-alphabet entries have "trials" of their own.)
  const mn::exp::Json ej = mn::exp::Json::parse(evaluation);
  EXPECT_EQ(ej["test_dir"]["trials"].get<double>(), 50.0) << evaluation;
  EXPECT_GT(ej["test_dir"]["accuracy_percent"].get<double>(), 45.0) << evaluation;
}

// Koch's siamese net with its BCE loss: runs to the end, the loss falls, and
// one-shot validation beats chance.
TEST(OmniglotStudy, SiameseSmokeLossFallsAndBeatsChance) {
  TempDir out("siam"), cache("cache");
  auto args = base_args(out.str(), cache.str()) +
              std::vector<std::string>{"--epochs", "3", "--iters", "10", "--batch", "16", "--val-triplets", "50",
                                       "--val-tasks", "40", "--lr", "1e-3"};
  RunResult r = run_study(StudyKind::Siamese, args);
  ASSERT_EQ(r.rc, 0);
  auto lines = read_lines(out / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  const double first = json_field(lines.front(), "train_loss"), last = json_field(lines.back(), "train_loss");
  ASSERT_TRUE(std::isfinite(first) && std::isfinite(last));
  EXPECT_LT(last, first) << "training loss did not fall";
  // Highest similarity wins; chance is 20 % (see the triplet test for the bound).
  EXPECT_GT(json_field(lines.back(), "val_one_shot_percent"), 45.0) << lines.back();
  EXPECT_TRUE(fs::exists(out / "summary.json"));
}

// ------------------------------------------------------ checkpoint round trip --
mn::nn::KochBranchOptions small_branch() {
  mn::nn::KochBranchOptions o;
  o.width = 0.125;
  o.embedding = 16;
  return o;
}

TEST(OmniglotStudy, CheckpointRoundTripGivesBitIdenticalEmbeddings) {
  TempDir dir("ckpt");
  mn::Generator g1(11), g2(99);
  mn::nn::TripletNet a(small_branch(), mn::nn::TripletShare::DisjointAnchor, g1);
  mn::nn::TripletNet b(small_branch(), mn::nn::TripletShare::DisjointAnchor, g2);
  a.eval();
  b.eval();
  mn::Tensor x = mn::test::rand({3, 1, kSize, kSize}, 0.0, 255.0, mn::DType::F32, mn::Device::cpu(), 5);
  auto embed = [&](mn::nn::TripletNet& net) {
    mn::ag::NoGradGuard ng;
    return std::make_pair(net.embed_anchor(mn::ag::Variable(x)).data().to_vector<float>(),
                          net.embed_candidate(mn::ag::Variable(x)).data().to_vector<float>());
  };
  auto ea = embed(a);
  // Different seeds: the fresh net must differ before loading, or the test proves nothing.
  ASSERT_NE(ea.first, embed(b).first);
  const std::string path = dir / "net.safetensors";
  mn::nn::save_checkpoint(path, a, nullptr, {{"note", "round trip"}});
  mn::nn::Metadata md = mn::nn::load_checkpoint(path, b, nullptr);
  EXPECT_EQ(md.at("note"), "round trip");
  auto eb = embed(b);
  // Bit-identical: the same weights and the same deterministic CPU kernels.
  ASSERT_EQ(ea.first.size(), eb.first.size());
  EXPECT_EQ(0, std::memcmp(ea.first.data(), eb.first.data(), ea.first.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(ea.second.data(), eb.second.data(), ea.second.size() * sizeof(float)));
  // The file holds every parameter under its documented name.
  mn::nn::SafetensorsFile f = mn::nn::read_safetensors(path);
  for (const auto& [name, v] : a.named_parameters()) EXPECT_TRUE(f.tensors.count(name)) << name;
  EXPECT_TRUE(f.tensors.count("branch.conv1.weight"));
  EXPECT_TRUE(f.tensors.count("anchor_branch.dense.weight"));
}

TEST(OmniglotStudy, ResumeEqualsUninterruptedRun) {
  TempDir a("resA"), b("resB"), cache("cache");
  const std::vector<std::string> common = {"--iters", "3", "--batch", "4", "--val-triplets", "12",
                                           "--val-tasks", "6", "--lr", "1e-3", "--seed", "7"};
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(a.str(), cache.str()) + common +
                                              std::vector<std::string>{"--epochs", "2"}).rc, 0);
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(b.str(), cache.str()) + common +
                                              std::vector<std::string>{"--epochs", "1"}).rc, 0);
  ASSERT_EQ(read_lines(b / "metrics.jsonl").size(), 1u);
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(b.str(), cache.str()) + common +
                                              std::vector<std::string>{"--epochs", "2", "--resume"}).rc, 0);

  // Optimizer state and step counts are among the compared tensors; the RNG states too.
  expect_same_run(a.path, b.path);
  EXPECT_EQ(mn::nn::read_safetensors(a / "last.safetensors").metadata.at("epoch"), "2");
  EXPECT_EQ(read_lines(a / "metrics.jsonl").size(), 2u);
}

// Every allocation handed out full of NaN bytes (MN_POISON, runtime/allocator.h)
// changes nothing in a run: the same weights, optimizer and RNG states, metrics
// and scores. Covers the Koch nets (LRN, dropout), the conv4 trunk with batch
// norm, online balanced batches with mining and the multi-similarity loss.
TEST(OmniglotStudy, PoisonedAllocationsChangeNothing) {
  struct Case {
    StudyKind kind;
    std::vector<std::string> flags;
  };
  const std::vector<Case> cases = {
      {StudyKind::Triplet, {"--dropout", "0.2", "--lrn"}},
      {StudyKind::Siamese, {"--dropout", "0.2"}},
      {StudyKind::Triplet, {"--trunk", "conv4", "--image-size", "28", "--loss", "multi-similarity",
                            "--sampling", "online-balanced", "--per-class", "2"}},
      {StudyKind::Triplet, {"--loss", "kumar", "--sampling", "hard-positive"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.flags));
    TempDir a("poison_off"), b("poison_on"), cache("cache");
    const std::vector<std::string> common = {"--iters", "3", "--batch", "4", "--val-triplets", "12",
                                             "--val-tasks", "6", "--lr", "1e-3", "--seed", "3", "--epochs", "1"};
    auto args = [&](const TempDir& out) {
      std::vector<std::string> v = base_args(out.str(), cache.str()) + common + c.flags;
      if (std::find(v.begin(), v.end(), "conv4") != v.end()) {  // --width is the Koch net's
        auto w = std::find(v.begin(), v.end(), "--width");
        v.erase(w, w + 2);
      }
      return v;
    };
    RunResult ra, rb;
    {
      mn::test::PoisonScope off(false);
      ra = run_study(c.kind, args(a), true);
    }
    {
      mn::test::PoisonScope on(true);
      rb = run_study(c.kind, args(b), true);
    }
    ASSERT_EQ(ra.rc, 0) << ra.err;
    ASSERT_EQ(rb.rc, 0) << rb.err;
    expect_same_run(a.path, b.path);
  }
}

// A run stopped anywhere (mid-epoch, with the validation of an epoch pending,
// mid-epoch to mid-epoch; --stop-after each time) and resumed ends with exactly
// the weights, optimizer state, RNG states and metrics of an uninterrupted run;
// every stop exits with status 3 and leaves a checkpoint.
class MidEpochResume : public ::testing::TestWithParam<StudyKind> {};

TEST_P(MidEpochResume, StopsAnywhereAndResumesExactly) {
  const StudyKind kind = GetParam();
  TempDir a("midA"), b("midB"), cache("cache");
  const std::vector<std::string> common = {"--iters", "3", "--batch", "4", "--val-triplets", "12", "--val-tasks",
                                           "6", "--lr", "1e-3", "--seed", "5", "--epochs", "2", "--dropout", "0.2"};
  ASSERT_EQ(run_study(kind, base_args(a.str(), cache.str()) + common).rc, 0);

  // 1. Two iterations of epoch 1.
  RunResult r = run_study(kind, base_args(b.str(), cache.str()) + common + std::vector<std::string>{"--stop-after", "2"});
  ASSERT_EQ(r.rc, 3);
  mn::nn::SafetensorsFile f0 = mn::nn::read_safetensors(b / "last.safetensors");
  EXPECT_EQ(f0.metadata.at("epoch"), "0");
  EXPECT_EQ(f0.metadata.at("iter"), "2");
  EXPECT_EQ(read_lines(b / "metrics.jsonl").size(), 0u);
  // 2. Two more: the end of epoch 1 (validated, checkpointed) and one of epoch 2.
  r = run_study(kind, base_args(b.str(), cache.str()) + common + std::vector<std::string>{"--resume", "--stop-after", "2"});
  ASSERT_EQ(r.rc, 3);
  mn::nn::SafetensorsFile f1 = mn::nn::read_safetensors(b / "last.safetensors");
  EXPECT_EQ(f1.metadata.at("epoch"), "1");
  EXPECT_EQ(f1.metadata.at("iter"), "1");
  EXPECT_EQ(read_lines(b / "metrics.jsonl").size(), 1u);
  // 3. One more iteration (mid-epoch to mid-epoch), then the rest.
  ASSERT_EQ(run_study(kind, base_args(b.str(), cache.str()) + common +
                                std::vector<std::string>{"--resume", "--stop-after", "1"}).rc, 3);
  EXPECT_EQ(mn::nn::read_safetensors(b / "last.safetensors").metadata.at("iter"), "2");
  ASSERT_EQ(run_study(kind, base_args(b.str(), cache.str()) + common + std::vector<std::string>{"--resume"}).rc, 0);
  expect_same_run(a.path, b.path);
}

INSTANTIATE_TEST_SUITE_P(BothStudies, MidEpochResume, ::testing::Values(StudyKind::Triplet, StudyKind::Siamese),
                         [](const auto& info) { return info.param == StudyKind::Triplet ? "Triplet" : "Siamese"; });

// The training step leaves its statistics on the device (DeviceStats): with
// --log-every beyond the run, a run of 5 steps reads nothing more to the host
// than a run of 1 (setup and the stop's single read are the same in both), for
// each kind of step: offline triplets, a P x K whole-batch loss, mined triplets,
// siamese pairs. On the CPU this checks the study and harness code; the device
// reads inside the CUDA kernels' launchers are checked by the GPU variant below.
TEST(OmniglotStudy, StepsReadNothingToTheHostBetweenLogReads) {
  struct Case {
    StudyKind kind;
    std::vector<std::string> flags;
  };
  const std::vector<Case> cases = {
      {StudyKind::Triplet, {}},
      {StudyKind::Triplet, {"--sampling", "online-balanced", "--loss", "multi-similarity", "--per-class", "2"}},
      {StudyKind::Triplet, {"--sampling", "batch-hard", "--per-class", "2"}},
      {StudyKind::Triplet, {"--sampling", "online-random-negative", "--loss", "schroff", "--per-class", "3"}},
      {StudyKind::Siamese, {}}};
  for (const Case& c : cases) {
    uint64_t reads[2];
    int k = 0;
    for (const char* steps : {"1", "5"}) {
      TempDir out("reads"), cache("cache");
      const uint64_t before = mn::transfer_stats().host_reads;
      ASSERT_EQ(run_study(c.kind, base_args(out.str(), cache.str()) + c.flags +
                                      std::vector<std::string>{"--iters", "8", "--batch", "4", "--val-triplets", "12",
                                                               "--val-tasks", "6", "--log-every", "100",
                                                               "--stop-after", steps}).rc, 3);
      reads[k++] = mn::transfer_stats().host_reads - before;
    }
    EXPECT_EQ(reads[1], reads[0]) << (c.kind == StudyKind::Triplet ? "triplet" : "siamese") << " "
                                  << (c.flags.empty() ? "default" : c.flags[1]);
  }
}

// Whether a GPU run could capture each kind of step as a CUDA graph: the
// harness audits the third step on the CPU too (runtime/graph.h) and writes the
// verdict to summary.json. Offline triplets and siamese pairs (Adam or SGD), and
// a deterministic miner into a fixed capacity, audit clean; a random miner,
// dropout and a miner whose output size is read back name what a graph cannot
// replay; --no-cuda-graph skips the audit.
TEST(OmniglotStudy, TheStepAuditSaysWhetherAGpuRunWouldCaptureIt) {
  struct Case {
    StudyKind kind;
    std::vector<std::string> flags;
    std::string expect;  // a substring of summary.json's cuda_graph
  };
  const std::vector<Case> cases = {
      {StudyKind::Triplet, {}, "audits clean"},
      {StudyKind::Siamese, {}, "audits clean"},
      {StudyKind::Triplet, {"--sampling", "batch-hard", "--loss", "schroff", "--per-class", "2"}, "audits clean"},
      {StudyKind::Triplet, {"--sampling", "batch-hard", "--per-class", "2"}, "without a fixed capacity"},
      {StudyKind::Triplet, {"--sampling", "online-random-negative", "--loss", "schroff", "--per-class", "3"},
       "a random draw"},
      {StudyKind::Triplet, {"--dropout", "0.2"}, "a random draw"},
      {StudyKind::Triplet, {"--optimizer", "sgd"}, "audits clean"},
      {StudyKind::Triplet, {"--sampling", "online-balanced", "--loss", "multi-similarity", "--per-class", "2"},
       "audits clean"},
      {StudyKind::Triplet, {"--no-cuda-graph"}, "off: --no-cuda-graph"}};
  for (const Case& c : cases) {
    TempDir out("audit"), cache("cache");
    ASSERT_EQ(run_study(c.kind, base_args(out.str(), cache.str()) + c.flags +
                                    std::vector<std::string>{"--epochs", "1", "--iters", "4", "--batch", "4",
                                                             "--val-triplets", "12", "--val-tasks", "6"}).rc, 0);
    const std::string summary = read_text(out / "summary.json");
    const auto at = summary.find("\"cuda_graph\"");
    ASSERT_NE(at, std::string::npos) << summary;
    const std::string verdict = summary.substr(at, summary.find('\n', at) - at);
    EXPECT_NE(verdict.find(c.expect), std::string::npos)
        << (c.flags.empty() ? "default" : c.flags[0] + " " + c.flags[1]) << ": " << verdict;
  }
}

// On a GPU the step is captured and replayed (summary.json says so) and the run
// ends exactly where the eager run (--no-cuda-graph) ends: weights, optimizer
// state, RNG states, metrics. Offline triplets (the study's Adam) and the P x K
// whole-batch loss; two epochs, so the second runs on the graph captured in the first.
TEST(OmniglotStudy, CudaGraphRunEqualsEagerRun) {
  MN_SKIP_IF_NO_CUDA();
  const std::vector<std::vector<std::string>> cases = {
      {}, {"--sampling", "online-balanced", "--loss", "multi-similarity", "--per-class", "2"}};
  for (const auto& flags : cases) {
    TempDir eager("eager"), graph("graph"), cache("cache");
    auto gpu = [&](const TempDir& out) {
      auto args = base_args(out.str(), cache.str());
      for (size_t i = 0; i + 1 < args.size(); ++i)
        if (args[i] == "--device") args[i + 1] = "cuda";
      return args + flags + std::vector<std::string>{"--epochs", "2", "--iters", "6", "--batch", "4",
                                                     "--val-triplets", "12", "--val-tasks", "6"};
    };
    ASSERT_EQ(run_study(StudyKind::Triplet, gpu(eager) + std::vector<std::string>{"--no-cuda-graph"}).rc, 0);
    ASSERT_EQ(run_study(StudyKind::Triplet, gpu(graph)).rc, 0);
    EXPECT_NE(read_text(graph / "summary.json").find("\"on: captured"), std::string::npos)
        << read_text(graph / "summary.json");
    expect_same_run(eager.path, graph.path);
  }
}

// The same on a GPU, counting real device-to-host copies (each a wait for the
// device): a per-term loss over mined triplets (fixed capacity, the count on the
// device), the P x K whole-batch loss and offline triplets add none per step.
// The batch's indices, labels and augmentation parameters go host -> device
// through the pinned staging ring (runtime/upload.h): none of them waits.
TEST(OmniglotStudy, CudaStepsCopyNothingToTheHostBetweenLogReads) {
  MN_SKIP_IF_NO_CUDA();
  const std::vector<std::vector<std::string>> cases = {
      {}, {"--sampling", "online-balanced", "--loss", "multi-similarity", "--per-class", "2"},
      {"--sampling", "online-random-negative", "--loss", "schroff", "--per-class", "3"}};
  for (const auto& flags : cases) {
    uint64_t copies[2], waits[2];
    int k = 0;
    for (const char* steps : {"1", "5"}) {
      TempDir out("cuda_reads"), cache("cache");
      auto args = base_args(out.str(), cache.str());
      for (size_t i = 0; i + 1 < args.size(); ++i)
        if (args[i] == "--device") args[i + 1] = "cuda";
      const uint64_t before = mn::transfer_stats().d2h_copies, waited = mn::upload_stats().waited;
      ASSERT_EQ(run_study(StudyKind::Triplet, args + flags +
                                                  std::vector<std::string>{"--iters", "8", "--batch", "4",
                                                                           "--val-triplets", "12", "--val-tasks", "6",
                                                                           "--log-every", "100", "--stop-after", steps})
                    .rc, 3);
      copies[k] = mn::transfer_stats().d2h_copies - before;
      waits[k++] = mn::upload_stats().waited - waited;
    }
    EXPECT_EQ(copies[1], copies[0]) << (flags.empty() ? "offline" : flags[1]);
    EXPECT_EQ(waits[1], waits[0]) << (flags.empty() ? "offline" : flags[1]) << ": an upload in the step waited";
  }
}

// A CPU run gives the same weights, RNG states and metrics for any thread count
// (every CPU kernel's reductions run in an order that does not depend on it).
TEST(OmniglotStudy, CpuRunIndependentOfThreadCount) {
  const int saved = mn::num_threads();
  TempDir a("thr1"), b("thr3"), cache("cache");
  const std::vector<std::string> common = {"--iters", "3", "--batch", "6", "--val-triplets", "12", "--val-tasks",
                                           "6", "--lr", "1e-3", "--seed", "9", "--epochs", "1", "--dropout", "0.1"};
  mn::set_num_threads(1);
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(a.str(), cache.str()) + common).rc, 0);
  mn::set_num_threads(3);
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(b.str(), cache.str()) + common).rc, 0);
  mn::set_num_threads(saved);
  expect_same_run(a.path, b.path);
}

// ------------------------------------------ candidate order invariance --
// Scores one-shot tasks on the synthetic evaluation set with a TripletNet's
// embeddings, then again with every task's candidates permuted (answers moved
// along): the accuracy and the tie count must not change. A second scorer with
// coarsely quantised distances makes ties frequent, which a position-dependent
// argmin would break differently after the permutation.
TEST(OmniglotStudy, OneShotScoreIsInvariantToCandidateOrder) {
  TempDir cache("cache");
  mn::data::OmniglotLoadOptions lo;
  lo.cache_dir = cache.str();
  mn::data::ImageDataset ds = mn::data::load_omniglot_set(omniglot_root() + "/images_evaluation", lo);
  mn::data::TaskOptions to;
  to.n_way = 5;
  to.num_tasks = 30;
  to.seed = 3;
  to.kind = mn::data::TaskKind::AnchorCandidates;
  auto tasks = mn::data::make_one_shot_tasks(ds, to);
  ASSERT_EQ(tasks.size(), 30u);

  std::vector<mn::data::OneShotTask> permuted = tasks;
  std::mt19937 rng(17);
  for (auto& t : permuted) {
    std::vector<int> perm(t.candidates.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);  // new position i holds old candidate perm[i]
    std::vector<int64_t> cand(perm.size());
    std::vector<int> where(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) cand[i] = t.candidates[perm[i]], where[perm[i]] = static_cast<int>(i);
    t.candidates = cand;
    for (auto& a : t.answer) a = where[a];
  }

  mn::Generator g(5);
  mn::nn::TripletNet net(small_branch(), mn::nn::TripletShare::Full, g);
  net.eval();
  auto embed = [&](const mn::Tensor& u8) {
    mn::ag::NoGradGuard ng;
    mn::Tensor x = mn::data::to_float(u8, mn::data::FloatMode::Ink01, mn::DType::F32)
                       .reshape({u8.size(0), 1, u8.size(1), u8.size(2)});
    return net.embed_candidate(mn::ag::Variable(x)).data().to_vector<float>();
  };
  // Euclidean distances, optionally rounded to a coarse grid (ties).
  auto make_fn = [&](double quantum) {
    return [&, quantum](const mn::Tensor& q, const mn::Tensor& c) {
      auto eq = embed(q), ec = embed(c);
      const int64_t Q = q.size(0), C = c.size(0), D = static_cast<int64_t>(eq.size()) / Q;
      std::vector<double> m(Q * C);
      for (int64_t i = 0; i < Q; ++i)
        for (int64_t j = 0; j < C; ++j) {
          double s = 0;
          for (int64_t k = 0; k < D; ++k) {
            double d = double(eq[i * D + k]) - ec[j * D + k];
            s += d * d;
          }
          s = std::sqrt(s);
          m[i * C + j] = quantum > 0 ? std::floor(s / quantum) : s;
        }
      return mn::Tensor::from_vector(m, {Q, C});
    };
  };
  for (double quantum : {0.0, 1e9}) {  // exact distances; everything tied
    auto r1 = mn::data::evaluate_tasks(ds, tasks, make_fn(quantum), mn::data::ScoreKind::Cost);
    auto r2 = mn::data::evaluate_tasks(ds, permuted, make_fn(quantum), mn::data::ScoreKind::Cost);
    EXPECT_EQ(r1.trials, 30);
    EXPECT_EQ(r1.trials, r2.trials);
    EXPECT_DOUBLE_EQ(r1.correct, r2.correct) << "quantum " << quantum;
    EXPECT_EQ(r1.ties, r2.ties);
    if (quantum > 0) {
      // All candidates tied: each trial counts 1/5, accuracy exactly chance.
      EXPECT_NEAR(r1.correct, 30.0 / 5.0, 1e-9);
      EXPECT_EQ(r1.ties, 30);
    }
  }
}

// -------------------------------------------------------- flags and errors --
// --help shows the flags a run needs in sections; --help-all every flag; each flag once.
TEST(OmniglotStudy, HelpListsEveryFlag) {
  testing::internal::CaptureStdout();
  int rc = run_study(StudyKind::Triplet, {"--help-all"}).rc;
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  for (const char* flag : {"--loss", "--margin", "--global-l", "--global-t", "--global-g", "--sampling", "--share",
                           "--activation", "--input-norm", "--lrn", "--batchnorm", "--dropout", "--augment",
                           "--optimizer", "--lr", "--epochs", "--iters", "--batch", "--seed", "--device",
                           "--data-dir", "--out-dir", "--resume", "--config", "--evaluate", "--test-dir",
                           "--cache-dir", "--precision", "--export-weights"}) {
    const size_t at = out.find("\n  " + std::string(flag) + " ");
    EXPECT_NE(at, std::string::npos) << "--help-all does not list " << flag;
    EXPECT_EQ(out.find("\n  " + std::string(flag) + " ", at + 1), std::string::npos) << flag << " listed twice";
  }
  EXPECT_NE(out.find("default"), std::string::npos);
  EXPECT_NE(out.find("\nthe study's ablations"), std::string::npos) << out;
  testing::internal::CaptureStdout();
  rc = run_study(StudyKind::Triplet, {"--help"}).rc;
  const std::string short_help = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_NE(short_help.find("\ncore:\n  --preset "), std::string::npos) << short_help;
  EXPECT_NE(short_help.find("\n  --loss "), std::string::npos);
  EXPECT_EQ(short_help.find("\n  --global-l "), std::string::npos) << "an ablation flag in the short --help";
  EXPECT_NE(short_help.find("--help-all"), std::string::npos);

  testing::internal::CaptureStdout();
  rc = run_study(StudyKind::Siamese, {"--help-all"}).rc;
  out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  for (const char* flag : {"--optimizer", "--lr", "--augment", "--epochs", "--resume", "--evaluate", "--test-dir"})
    EXPECT_NE(out.find(std::string(flag) + " "), std::string::npos) << "siamese --help-all does not list " << flag;
}

TEST(OmniglotStudy, BadFlagValuesExitWithUsageError) {
  struct Case {
    std::vector<std::string> args;
    std::string must_mention;
  };
  const Case cases[] = {{{"--loss", "foo"}, "--loss"},
                        {{"--epochs", "x"}, "--epochs"},
                        {{"--nonsense", "1"}, "--nonsense"},
                        {{"--lr", "fast"}, "--lr"},
                        {{"--share", "none"}, "--share"},
                        {{"--epochs"}, "--epochs"}};
  for (const auto& c : cases) {
    RunResult r = run_study(StudyKind::Triplet, c.args, /*capture_stderr=*/true);
    EXPECT_EQ(r.rc, 2) << c.args[0];
    EXPECT_NE(r.err.find(c.must_mention), std::string::npos) << "stderr: " << r.err;
  }
  // Name-valued flags list the registry's names.
  RunResult rn = run_study(StudyKind::Triplet, {"--loss", "foo"}, true);
  for (const char* name : {"schroff", "global", "multi-similarity"})
    EXPECT_NE(rn.err.find(name), std::string::npos) << name << " missing from: " << rn.err;
  // A whole-batch loss without P x K batches, and P x K batches without a miner for a triplet loss.
  // (--preset full: the flag check alone, whatever preset this machine would pick.)
  for (const auto& args : {std::vector<std::string>{"--loss", "multi-similarity", "--preset", "full"},
                           std::vector<std::string>{"--sampling", "online-balanced", "--preset", "full"}}) {
    RunResult rw = run_study(StudyKind::Triplet, args, true);
    EXPECT_EQ(rw.rc, 2) << args[0];
    EXPECT_NE(rw.err.find("online-balanced"), std::string::npos) << rw.err;
  }
  // The siamese binary has no triplet loss flag.
  RunResult r = run_study(StudyKind::Siamese, {"--loss", "global"}, true);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--loss"), std::string::npos) << r.err;
}

TEST(OmniglotStudy, MissingDataDirIsAClearError) {
  TempDir out("nodata");
  RunResult r = run_study(StudyKind::Triplet,
                          {"--data-dir", out / "no_such_folder", "--out-dir", out / "o", "--device", "cpu"}, true);
  EXPECT_EQ(r.rc, 2);  // checked with the flags, before anything is loaded
  EXPECT_NE(r.err.find("--data-dir"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no_such_folder"), std::string::npos) << r.err;
}

TEST(OmniglotStudy, ConfigFileIsAppliedAndCommandLineOverridesIt) {
  TempDir out("cfg"), cache("cache");
  const std::string cfg = out / "study.cfg";
  {
    std::ofstream f(cfg);
    f << "# a config file with the flags' keys\n"
      << "epochs = 1\n"
      << "iters: 5\n"
      << "batch = 4\n"
      << "val-triplets = 12\n"
      << "val-tasks = 6\n"
      << "lr = 0.002   # trailing comment\n"
      << "loss = kumar\n";
  }
  const std::string run_dir = out / "run";
  RunResult r = run_study(StudyKind::Triplet,
                          base_args(run_dir, cache.str()) + std::vector<std::string>{"--config", cfg, "--iters", "2"});
  ASSERT_EQ(r.rc, 0);
  auto lines = read_lines(run_dir + "/metrics.jsonl");
  EXPECT_EQ(lines.size(), 1u) << "epochs = 1 from the config file was not applied";
  ASSERT_FALSE(lines.empty());
  EXPECT_DOUBLE_EQ(json_field(lines[0], "lr"), 0.002);
  const std::string used = read_text(run_dir + "/config.txt");
  EXPECT_NE(used.find("iters = 2\n"), std::string::npos) << used;  // command line wins
  EXPECT_NE(used.find("batch = 4\n"), std::string::npos) << used;
  EXPECT_NE(used.find("loss = kumar\n"), std::string::npos) << used;

  // A bad line in the config file names the file and the line.
  {
    std::ofstream f(cfg);
    f << "epochs = 1\nloss = nope\n";
  }
  RunResult bad = run_study(StudyKind::Triplet, {"--config", cfg}, true);
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("study.cfg:2"), std::string::npos) << bad.err;
}

// Adam with lr 1e30 moves every weight by ~1e30 on the first step, so the second
// forward overflows float32 and the loss is NaN/inf. The run must stop with exit
// status 1 and a message, and leave the last good checkpoint (from an earlier run
// in the same folder) untouched.
TEST(OmniglotStudy, NonFiniteLossStopsAndKeepsLastCheckpoint) {
  TempDir out("nan"), cache("cache");
  const std::vector<std::string> small = {"--iters", "3", "--batch", "4", "--val-triplets", "12", "--val-tasks", "6"};
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(out.str(), cache.str()) + small +
                                              std::vector<std::string>{"--epochs", "1"}).rc, 0);
  const std::string good = read_text(out / "last.safetensors");
  ASSERT_FALSE(good.empty());
  RunResult r = run_study(StudyKind::Triplet, base_args(out.str(), cache.str()) + small +
                                                  std::vector<std::string>{"--epochs", "2", "--lr", "1e30"},
                          true);
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(r.err.find("NaN") != std::string::npos || r.err.find("infinite") != std::string::npos) << r.err;
  EXPECT_NE(r.err.find("last.safetensors"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(out / "last.safetensors"), good) << "the last good checkpoint was overwritten";
}

}  // namespace

// ------------------------------------------------------ every study variant --
// Each variable of the study runs end to end on the synthetic data: the run
// finishes, every epoch's loss is finite and the outputs exist. (Whether a
// variant helps is the GPU reproduction's question, not a unit test's.)
struct Variant {
  const char* name;
  StudyKind kind;
  std::vector<std::string> flags;
};

class StudyVariants : public ::testing::TestWithParam<Variant> {};

TEST_P(StudyVariants, RunsAndLogsFiniteLosses) {
  const Variant& v = GetParam();
  TempDir out(std::string("var_") + v.name), cache("cache");
  auto args = base_args(out.str(), cache.str()) +
              std::vector<std::string>{"--epochs", "2", "--iters", "3", "--batch", "6", "--val-triplets", "12",
                                       "--val-tasks", "4"} +
              v.flags;
  RunResult r = run_study(v.kind, args, /*capture_stderr=*/true);
  ASSERT_EQ(r.rc, 0) << r.err;
  auto lines = read_lines(out / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& l : lines) {
    EXPECT_TRUE(std::isfinite(json_field(l, "train_loss"))) << l;
    EXPECT_TRUE(std::isfinite(json_field(l, "val_one_shot_percent"))) << l;
  }
  EXPECT_TRUE(fs::exists(out / "last.safetensors"));
  EXPECT_TRUE(fs::exists(out / "summary.json"));
}

INSTANTIATE_TEST_SUITE_P(
    OmniglotStudy, StudyVariants,
    ::testing::Values(
        Variant{"schroff", StudyKind::Triplet, {"--loss", "schroff", "--margin", "0.2"}},
        Variant{"kumar", StudyKind::Triplet, {"--loss", "kumar"}},
        Variant{"global_triplet", StudyKind::Triplet, {"--loss", "global-triplet"}},
        Variant{"softmax", StudyKind::Triplet, {"--loss", "softmax"}},
        Variant{"hard_positive", StudyKind::Triplet, {"--sampling", "hard-positive"}},
        Variant{"semi_hard_negative", StudyKind::Triplet, {"--sampling", "semi-hard-negative"}},
        Variant{"batch_hard", StudyKind::Triplet, {"--sampling", "batch-hard", "--loss", "schroff"}},
        Variant{"online_semi_hard", StudyKind::Triplet, {"--sampling", "online-semi-hard", "--loss", "schroff"}},
        Variant{"online_random_negative", StudyKind::Triplet,
                {"--sampling", "online-random-negative", "--loss", "kumar"}},
        Variant{"disjoint_anchor", StudyKind::Triplet, {"--share", "disjoint-anchor"}},
        // The Multi-Similarity loss from the loss registry, on P x K batches with no miner.
        Variant{"multi_similarity", StudyKind::Triplet, {"--loss", "multi-similarity", "--sampling", "online-balanced"}},
        Variant{"margin_l2_adamw", StudyKind::Triplet, {"--loss", "margin-l2", "--optimizer", "adamw"}},
        Variant{"norms_dropout_augment", StudyKind::Triplet,
                {"--lrn", "--batchnorm", "--dropout", "0.1", "--augment", "--input-norm"}},
        Variant{"selu_sgd", StudyKind::Triplet, {"--activation", "selu", "--optimizer", "sgd", "--lr", "1e-3"}},
        Variant{"elu_koch_init_first_drawers", StudyKind::Triplet,
                {"--activation", "elu", "--init", "koch", "--train-max-drawer", "4"}},
        Variant{"siamese_sgd_layerwise", StudyKind::Siamese,
                {"--optimizer", "sgd", "--lr", "1e-2", "--group-lr", "1,1,0.5,0.5,0.1,1", "--group-momentum",
                 "0.9,0.9,0.8,0.8,0.7,0.9"}},
        Variant{"siamese_ssim_both", StudyKind::Siamese, {"--sampling", "ssim-both", "--dropout", "0.2"}}),
    [](const ::testing::TestParamInfo<Variant>& i) { return std::string(i.param.name); });

// ------------------------------------------- conv4 trunk and the CPU presets --
namespace {
std::vector<std::string> conv4_args(const std::string& out_dir, const std::string& cache_dir) {
  return {"--data-dir", omniglot_root(), "--out-dir", out_dir, "--cache-dir", cache_dir, "--device", "cpu",
          "--preset", "full", "--val-way", "5", "--eval-batch", "64", "--epochs", "2", "--iters", "3",
          "--val-triplets", "12", "--val-tasks", "4"};
}
}  // namespace

// The conv4 trunk on downscaled images with rotated classes, within-alphabet
// P x K batches, augmentation and the Multi-Similarity loss; --test-dir tasks
// (105x105 images) are downscaled the same way before scoring.
TEST(OmniglotStudy, Conv4OnSmallImagesWithRotationsAndAlphabetBatches) {
  TempDir out("conv4"), cache("cache");
  auto args = conv4_args(out.str(), cache.str()) +
              std::vector<std::string>{"--trunk", "conv4", "--channels", "8", "--image-size", "28", "--rotations",
                                       "--pk-alphabet", "--batch", "4", "--per-class", "3", "--augment",
                                       "--input-norm", "--loss", "multi-similarity", "--sampling", "online-balanced",
                                       "--test-dir", omniglot_root() + "/images_evaluation", "--test-way", "5",
                                       "--test-tasks", "4"};
  testing::internal::CaptureStdout();
  RunResult r = run_study(StudyKind::Triplet, args, true);
  const std::string stdout_text = testing::internal::GetCapturedStdout();
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(stdout_text.find("area-averaged to 28x28"), std::string::npos) << stdout_text;
  EXPECT_NE(stdout_text.find("96 classes"), std::string::npos) << "4 x 24 training characters: " << stdout_text;
  auto lines = read_lines(out / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& l : lines) EXPECT_TRUE(std::isfinite(json_field(l, "train_loss"))) << l;
  const std::string summary = read_text(out / "summary.json");
  EXPECT_NE(summary.find("\"trunk\": \"conv4\""), std::string::npos);
  EXPECT_NE(summary.find("\"test_dir\""), std::string::npos) << "the 105x105 --test-dir tasks were not scored";
  // The checkpoint holds conv4's parameters and resumes (no dropout generator).
  const auto md = mn::nn::read_safetensors_metadata(out / "last.safetensors");
  EXPECT_EQ(md.count("rng.dropout.seed"), 0u);
  RunResult again = run_study(StudyKind::Triplet, args + std::vector<std::string>{"--resume", "--epochs", "3"}, true);
  EXPECT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(read_lines(out / "metrics.jsonl").size(), 3u);
}

TEST(OmniglotStudy, CpuPresetsSetConv4AndUserFlagsWin) {
  TempDir out("preset"), cache("cache");
  std::vector<std::string> args = conv4_args(out.str(), cache.str());
  args[9] = "cpu-demo";  // --preset
  ASSERT_EQ(args[8], "--preset");
  // The synthetic alphabets have 6 characters of 6 drawings each.
  args = args + std::vector<std::string>{"--batch", "4", "--per-class", "3"};
  testing::internal::CaptureStdout();
  RunResult r = run_study(StudyKind::Triplet, args, true);
  const std::string text = testing::internal::GetCapturedStdout();
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(text.find("cpu-demo preset: the conv4 trunk on 28x28 images"), std::string::npos) << text;
  const std::string summary = read_text(out / "summary.json");
  for (const char* kv : {"\"trunk\": \"conv4\"", "\"image-size\": 28", "\"rotations\": true", "\"batch\": 4",
                         "\"embedding\": 128", "\"per-class\": 3",
                         "\"epochs\": 2", "\"loss\": \"multi-similarity\"", "\"lr-schedule\": \"cosine\""})
    EXPECT_NE(summary.find(kv), std::string::npos) << kv << " not in " << summary;
  // --trunk koch gets the Koch net's demo values; a loss of the user's keeps the
  // preset's P x K sampling out (they go together).
  TempDir koch("preset_koch"), schroff("preset_schroff");
  auto with = [&](const TempDir& d, std::vector<std::string> extra) {
    std::vector<std::string> a = conv4_args(d.str(), cache.str());
    a[9] = "cpu-demo";
    return a + extra;
  };
  ASSERT_EQ(run_study(StudyKind::Triplet, with(koch, {"--trunk", "koch"}), true).rc, 0);
  const std::string ks = read_text(koch / "summary.json");
  for (const char* kv : {"\"trunk\": \"koch\"", "\"width\": 0.25", "\"image-size\": 105", "\"embedding\": 512"})
    EXPECT_NE(ks.find(kv), std::string::npos) << kv << " not in " << ks;
  ASSERT_EQ(run_study(StudyKind::Triplet, with(schroff, {"--loss", "schroff", "--batch", "4"}), true).rc, 0);
  const std::string ss = read_text(schroff / "summary.json");
  for (const char* kv : {"\"trunk\": \"conv4\"", "\"loss\": \"schroff\"", "\"sampling\": \"random\""})
    EXPECT_NE(ss.find(kv), std::string::npos) << kv << " not in " << ss;
  // The siamese binary has a cpu-demo preset (conv4 too) but no cpu-hour.
  RunResult rs = run_study(StudyKind::Siamese, {"--preset", "cpu-hour", "--device", "cpu"}, true);
  EXPECT_EQ(rs.rc, 2);
  EXPECT_NE(rs.err.find("cpu-hour"), std::string::npos) << rs.err;
  EXPECT_NE(rs.err.find("its presets: auto, full and cpu-demo"), std::string::npos) << rs.err;
  // Nor has the triplet binary's Koch net: the error names the trunk.
  TempDir koch_hour("preset_koch_hour");
  std::vector<std::string> ka = conv4_args(koch_hour.str(), cache.str());
  ka[9] = "cpu-4h";
  RunResult rk = run_study(StudyKind::Triplet, ka + std::vector<std::string>{"--trunk", "koch"}, true);
  EXPECT_EQ(rk.rc, 2);
  EXPECT_NE(rk.err.find("--preset cpu-4h: omniglot_triplet with --trunk koch has no such preset"), std::string::npos)
      << rk.err;
}

// The siamese binary with --trunk conv4: Koch's head on the conv4 features, its
// own parameter groups (conv, dense, head), a checkpoint without a dropout
// generator that resumes; its cpu-demo preset is conv4 unless --trunk koch.
TEST(OmniglotStudy, SiameseWithTheConv4Trunk) {
  TempDir out("siamese_conv4"), cache("cache");
  auto args = conv4_args(out.str(), cache.str()) +
              std::vector<std::string>{"--trunk", "conv4", "--channels", "8", "--image-size", "28", "--embedding", "16",
                                       "--input-norm", "--batch", "8", "--optimizer", "sgd", "--lr", "1e-2",
                                       "--group-lr", "1,0.5,2", "--group-momentum", "0.9,0.8,0.9"};
  RunResult r = run_study(StudyKind::Siamese, args, true);
  ASSERT_EQ(r.rc, 0) << r.err;
  auto lines = read_lines(out / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& l : lines) EXPECT_TRUE(std::isfinite(json_field(l, "train_loss"))) << l;
  const auto md = mn::nn::read_safetensors_metadata(out / "last.safetensors");
  EXPECT_EQ(md.count("rng.dropout.seed"), 0u);
  const auto file = mn::nn::read_safetensors(out / "last.safetensors");
  for (const char* n : {"branch.block1.conv.weight", "branch.block4.bn.running_var", "branch.dense.weight",
                        "head.weight", "head.bias"})
    EXPECT_EQ(file.tensors.count(n), 1u) << n;
  EXPECT_EQ(file.tensors.at("head.weight").shape(), (mn::Shape{1, 16}));
  RunResult again = run_study(StudyKind::Siamese, args + std::vector<std::string>{"--resume", "--epochs", "3"}, true);
  EXPECT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(read_lines(out / "metrics.jsonl").size(), 3u);
  // Koch's six per-layer groups do not apply to conv4 (conv, dense, head).
  TempDir bad("siamese_conv4_bad");
  RunResult six = run_study(StudyKind::Siamese, conv4_args(bad.str(), cache.str()) +
                                                    std::vector<std::string>{"--trunk", "conv4", "--embedding", "16",
                                                                             "--group-lr", "1,1,1,1,1,1"}, true);
  EXPECT_EQ(six.rc, 2);
  EXPECT_NE(six.err.find("expected 3 comma-separated values"), std::string::npos) << six.err;
  RunResult width = run_study(StudyKind::Siamese, conv4_args(bad.str(), cache.str()) +
                                                      std::vector<std::string>{"--trunk", "conv4", "--width", "0.5"}, true);
  EXPECT_EQ(width.rc, 2);
  EXPECT_NE(width.err.find("--width applies to --trunk koch only"), std::string::npos) << width.err;
  // The preset: conv4 on 28x28 by default, the Koch demo with --trunk koch.
  for (const bool koch : {false, true}) {
    TempDir d(koch ? "siamese_demo_koch" : "siamese_demo");
    std::vector<std::string> a = conv4_args(d.str(), cache.str());
    ASSERT_EQ(a[8], "--preset");
    a[9] = "cpu-demo";
    a = a + std::vector<std::string>{"--batch", "8"};
    if (koch) a = a + std::vector<std::string>{"--trunk", "koch", "--width", "0.125"};
    testing::internal::CaptureStdout();
    RunResult p = run_study(StudyKind::Siamese, a, true);
    const std::string text = testing::internal::GetCapturedStdout();
    ASSERT_EQ(p.rc, 0) << p.err;
    const std::string summary = read_text(d / "summary.json");
    if (koch) {
      EXPECT_NE(text.find("CPU demo preset: a scaled-down run"), std::string::npos) << text;
      for (const char* kv : {"\"trunk\": \"koch\"", "\"image-size\": 105", "\"embedding\": 512"})
        EXPECT_NE(summary.find(kv), std::string::npos) << kv << " not in " << summary;
    } else {
      EXPECT_NE(text.find("cpu-demo preset: the conv4 trunk on 28x28 images, 2 epochs x 3 iterations of 8 pairs"),
                std::string::npos) << text;
      for (const char* kv : {"\"trunk\": \"conv4\"", "\"image-size\": 28", "\"rotations\": true",
                             "\"embedding\": 128", "\"optimizer\": \"adam\""})
        EXPECT_NE(summary.find(kv), std::string::npos) << kv << " not in " << summary;
    }
  }
}

TEST(OmniglotStudy, Conv4AndBatchFlagsRefuseWhatDoesNotApply) {
  TempDir out("conv4_bad"), cache("cache");
  struct Case {
    std::vector<std::string> flags;
    std::string must_mention;
  };
  const Case cases[] = {{{"--trunk", "conv4", "--width", "0.5"}, "--width applies to --trunk koch only"},
                        {{"--trunk", "conv4", "--init", "koch"}, "--init applies to --trunk koch only"},
                        {{"--trunk", "conv4", "--conv4-sigmoid"}, "--conv4-sigmoid needs a dense layer"},
                        {{"--no-conv4-bn"}, "--conv4-bn applies to --trunk conv4 only"},
                        {{"--channels", "8"}, "--channels applies to --trunk conv4"},
                        {{"--per-class", "4"}, "--per-class applies to online sampling"},
                        {{"--trunk", "conv4", "--image-size", "12"}, "too small"},
                        {{"--image-size", "200"}, "--image-size"}};
  for (const auto& c : cases) {
    RunResult r = run_study(StudyKind::Triplet, conv4_args(out.str(), cache.str()) + c.flags, true);
    EXPECT_NE(r.rc, 0) << c.flags[0];
    EXPECT_NE(r.err.find(c.must_mention), std::string::npos) << "stderr: " << r.err;
  }
}

// --lr-schedule from the schedule registry: step with gamma 0.5 every epoch
// halves the rate; auto keeps Adam constant (the study) and an unknown name lists the valid ones.
// conv4 with every ablation option of the Koch branch (the grid's CPU scale): ELU, LRN
// and batch-norm after pooling, dropout, a sigmoid embedding, a disjoint anchor
// branch, no batch-norm of its own. It trains, the dropout generator is saved, and a
// resumed run continues.
TEST(OmniglotStudy, Conv4WithTheKochAblationOptions) {
  TempDir out("conv4_ablations"), cache("cache");
  auto args = conv4_args(out.str(), cache.str()) +
              std::vector<std::string>{"--trunk", "conv4", "--channels", "8", "--image-size", "28", "--batch", "4",
                                       "--embedding", "16", "--conv4-sigmoid", "--no-conv4-bn", "--activation", "elu",
                                       "--lrn", "--batchnorm", "--dropout", "0.2", "--share", "disjoint-anchor",
                                       "--loss", "kumar"};
  RunResult r = run_study(StudyKind::Triplet, args, true);
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const auto& l : read_lines(out / "metrics.jsonl")) EXPECT_TRUE(std::isfinite(json_field(l, "train_loss"))) << l;
  const auto md = mn::nn::read_safetensors_metadata(out / "last.safetensors");
  EXPECT_EQ(md.count("rng.dropout.seed"), 1u) << "conv4's dropout generator is saved";
  const auto names = mn::nn::read_safetensors_shapes(out / "last.safetensors");
  bool pool_bn = false, anchor = false, conv_bn = false;
  for (const auto& [n, shape] : names) {
    pool_bn |= n.find("block1.pool_bn.weight") != std::string::npos;
    anchor |= n.rfind("anchor_branch.block1.conv.weight", 0) == 0;
    conv_bn |= n.find("block1.bn.weight") != std::string::npos;
  }
  EXPECT_TRUE(pool_bn);
  EXPECT_TRUE(anchor);
  EXPECT_FALSE(conv_bn) << "--no-conv4-bn";
  RunResult again = run_study(StudyKind::Triplet, args + std::vector<std::string>{"--resume", "--epochs", "3"}, true);
  EXPECT_EQ(again.rc, 0) << again.err;
  EXPECT_EQ(read_lines(out / "metrics.jsonl").size(), 3u);
}

TEST(OmniglotStudy, LrScheduleFlag) {
  TempDir out("sched"), flat("sched_auto"), cache("cache");
  // A small conv4 net: the schedule is what is tested, not the network.
  const std::vector<std::string> small{"--trunk", "conv4", "--channels", "8", "--image-size", "28", "--batch", "4"};
  auto args = conv4_args(out.str(), cache.str()) + small +
              std::vector<std::string>{"--lr", "1e-3", "--lr-schedule", "step", "--lr-decay", "0.5",
                                       "--lr-step-epochs", "1"};
  ASSERT_EQ(run_study(StudyKind::Triplet, args, true).rc, 0);
  auto lines = read_lines(out / "metrics.jsonl");  // conv4_args: 2 epochs
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_DOUBLE_EQ(json_field(lines[0], "lr"), 1e-3);
  EXPECT_DOUBLE_EQ(json_field(lines[1], "lr"), 5e-4);
  ASSERT_EQ(run_study(StudyKind::Triplet, conv4_args(flat.str(), cache.str()) + small +
                                              std::vector<std::string>{"--lr", "1e-3"}, true).rc, 0);
  for (const auto& l : read_lines(flat / "metrics.jsonl")) EXPECT_DOUBLE_EQ(json_field(l, "lr"), 1e-3);
  // cosine over --epochs (2): epoch 1 is half way, (1 + cos(pi / 2)) / 2 = 1/2.
  TempDir cos("sched_cos");
  ASSERT_EQ(run_study(StudyKind::Triplet, conv4_args(cos.str(), cache.str()) + small +
                                              std::vector<std::string>{"--lr", "1e-3", "--lr-schedule", "cosine"},
                      true).rc, 0);
  lines = read_lines(cos / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_DOUBLE_EQ(json_field(lines[0], "lr"), 1e-3);
  EXPECT_NEAR(json_field(lines[1], "lr"), 5e-4, 1e-18);
  RunResult bad = run_study(StudyKind::Triplet, conv4_args(flat.str(), cache.str()) +
                                                    std::vector<std::string>{"--lr-schedule", "linear"}, true);
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("exponential"), std::string::npos) << bad.err;
}
