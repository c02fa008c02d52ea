// End-to-end tests of the Omniglot study driver (experiments/common/omniglot_study.h)
// on a small synthetic Omniglot-layout folder, on the CPU:
//   * smoke runs of the triplet and siamese studies (the loss falls, one-shot
//     validation accuracy beats chance, summary.json is written);
//   * checkpoint round trip of a TripletNet (bit-identical embeddings);
//   * --resume gives the same weights and metrics as an uninterrupted run;
//   * one-shot scoring of a trained-style model is invariant to candidate order;
//   * --help, bad flags, a missing data folder, --config, and a NaN loss.
//
// The fixture: images_background/ (4 alphabets x 6 characters x 6 drawers) and
// images_evaluation/ (2 alphabets x 8 characters x 6 drawers) of 105x105 1-bit
// PNGs. Each character is a distinct glyph (three thick strokes whose end points
// are drawn from a generator seeded by the character), each drawer perturbs the
// end points and shifts the glyph by a few pixels, so the classes are learnable
// and one-shot tasks are non-trivial. No all_runs/ folder: the driver then
// skips Lake's final test (tested in tests/data against Lake's layout).
#include <gtest/gtest.h>

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
#include "experiments/common/omniglot_study.h"
#include "nn/checkpoint.h"
#include "nn/models/koch.h"
#include "runtime/parallel.h"
#include "runtime/rng.h"
#include "tests/common/test_util.h"

namespace fs = std::filesystem;

namespace {

using mn::exp::StudyKind;

// ---------------------------------------------------------------- fixture --
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    std::random_device rd;
    path = fs::temp_directory_path() / ("mn_exp_test_" + tag + "_" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
  std::string operator/(const std::string& rel) const { return (path / rel).string(); }
};

constexpr int kSize = 105;

// A glyph: three strokes (segments) in pixel coordinates.
struct Glyph {
  double x0[3], y0[3], x1[3], y1[3];
};

Glyph make_glyph(uint64_t class_seed) {
  std::mt19937_64 g(class_seed * 2654435761ULL + 12345);
  std::uniform_real_distribution<double> u(18.0, 87.0);
  Glyph gl;
  for (int s = 0; s < 3; ++s) {
    gl.x0[s] = u(g), gl.y0[s] = u(g), gl.x1[s] = u(g), gl.y1[s] = u(g);
  }
  return gl;
}

// Renders `gl` with a per-drawer jitter of the end points (+-2 px) and a shift (+-3 px).
mn::data::GrayImage render(const Glyph& gl, uint64_t drawer_seed) {
  std::mt19937_64 g(drawer_seed * 11400714819323198485ULL + 7);
  std::uniform_real_distribution<double> jit(-2.0, 2.0), sh(-3.0, 3.0);
  const double dx = sh(g), dy = sh(g);
  double ax[3], ay[3], bx[3], by[3];
  for (int s = 0; s < 3; ++s) {
    ax[s] = gl.x0[s] + dx + jit(g), ay[s] = gl.y0[s] + dy + jit(g);
    bx[s] = gl.x1[s] + dx + jit(g), by[s] = gl.y1[s] + dy + jit(g);
  }
  mn::data::GrayImage img;
  img.height = img.width = kSize;
  img.pixels.assign(kSize * kSize, 255);  // white paper, black ink (Omniglot's convention)
  const double r2 = 3.0 * 3.0;            // stroke half-width 3 px
  for (int y = 0; y < kSize; ++y)
    for (int x = 0; x < kSize; ++x)
      for (int s = 0; s < 3; ++s) {
        double vx = bx[s] - ax[s], vy = by[s] - ay[s], wx = x - ax[s], wy = y - ay[s];
        double len2 = vx * vx + vy * vy;
        double t = len2 > 0 ? std::clamp((wx * vx + wy * vy) / len2, 0.0, 1.0) : 0.0;
        double ex = wx - t * vx, ey = wy - t * vy;
        if (ex * ex + ey * ey <= r2) {
          img.pixels[static_cast<size_t>(y) * kSize + x] = 0;
          break;
        }
      }
  return img;
}

void write_set(const fs::path& set_dir, const std::string& prefix, int alphabets, int chars, int drawers,
               uint64_t seed_base) {
  int img_id = 1;
  for (int a = 0; a < alphabets; ++a)
    for (int c = 0; c < chars; ++c) {
      char cname[32];
      std::snprintf(cname, sizeof cname, "character%02d", c + 1);
      fs::path dir = set_dir / (prefix + std::to_string(a + 1)) / cname;
      fs::create_directories(dir);
      const uint64_t cls_seed = seed_base + static_cast<uint64_t>(a * 100 + c);
      Glyph gl = make_glyph(cls_seed);
      for (int d = 1; d <= drawers; ++d) {
        char fname[32];
        std::snprintf(fname, sizeof fname, "%04d_%02d.png", img_id, d);
        mn::data::write_png_gray((dir / fname).string(), render(gl, cls_seed * 31 + d), /*one_bit=*/true);
      }
      ++img_id;
    }
}

// One synthetic Omniglot tree shared by every test of this file (written once).
const std::string& omniglot_root() {
  static TempDir* dir = [] {
    auto* d = new TempDir("omniglot");  // intentionally leaked until exit: removed by atexit below
    write_set(d->path / "images_background", "Background_", 4, 6, 6, 1000);
    write_set(d->path / "images_evaluation", "Evaluation_", 2, 8, 6, 5000);
    std::atexit([] { delete dir; });
    return d;
  }();
  static const std::string root = dir->str();
  return root;
}

// ------------------------------------------------------------ run helpers --
struct RunResult {
  int rc = -1;
  std::string err;
};

RunResult run_study(StudyKind kind, std::vector<std::string> args, bool capture_stderr = false) {
  args.insert(args.begin(), kind == StudyKind::Triplet ? "omniglot_triplet" : "omniglot_siamese");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  RunResult r;
  if (capture_stderr) testing::internal::CaptureStderr();
  r.rc = mn::exp::run_omniglot_study(kind, static_cast<int>(args.size()), argv.data());
  if (capture_stderr) r.err = testing::internal::GetCapturedStderr();
  return r;
}

// Flags every training test shares: the synthetic data, the CPU, a small net.
std::vector<std::string> base_args(const std::string& out_dir, const std::string& cache_dir) {
  return {"--data-dir", omniglot_root(), "--out-dir", out_dir, "--cache-dir", cache_dir, "--device", "cpu",
          "--preset", "full", "--width", "0.125", "--embedding", "32", "--val-way", "5", "--eval-batch", "64"};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string l;
  while (std::getline(in, l))
    if (!l.empty()) lines.push_back(l);
  return lines;
}

// The number after "key": in a flat JSON line (NaN when absent or null).
double json_field(const std::string& line, const std::string& key) {
  size_t p = line.find("\"" + key + "\": ");
  if (p == std::string::npos) return NAN;
  const char* s = line.c_str() + p + key.size() + 4;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  return end == s ? NAN : v;
}

// The line with the given fields removed (for comparisons that ignore timings).
std::string without_fields(std::string line, const std::vector<std::string>& keys) {
  for (const auto& k : keys) {
    size_t p = line.find("\"" + k + "\": ");
    if (p == std::string::npos) continue;
    size_t e = line.find_first_of(",}", p);
    if (e != std::string::npos && line[e] == ',') ++e;
    line.erase(p, e - p);
  }
  return line;
}

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
  EXPECT_EQ(json_field(evaluation, "trials"), 50.0) << evaluation;
  EXPECT_GT(json_field(evaluation, "accuracy_percent"), 45.0) << evaluation;
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

// ---------------------------------------------------------------- resume --
// Both runs end with the same weights, optimizer state, RNG states and metrics
// (timings aside).
void expect_same_run(const fs::path& a, const fs::path& b) {
  mn::nn::SafetensorsFile fa = mn::nn::read_safetensors((a / "last.safetensors").string());
  mn::nn::SafetensorsFile fb = mn::nn::read_safetensors((b / "last.safetensors").string());
  ASSERT_EQ(fa.tensors.size(), fb.tensors.size());
  for (const auto& [name, ta] : fa.tensors) {
    auto it = fb.tensors.find(name);
    ASSERT_NE(it, fb.tensors.end()) << name;
    ASSERT_EQ(ta.shape(), it->second.shape()) << name;
    ASSERT_EQ(ta.dtype(), it->second.dtype()) << name;
    EXPECT_EQ(0, std::memcmp(ta.contiguous().raw_data(), it->second.contiguous().raw_data(), ta.nbytes()))
        << "tensor " << name << " differs between the two runs";
  }
  for (const char* k : {"epoch", "rng.sample.offset", "rng.loader.offset", "rng.dropout.offset", "best_epoch"})
    EXPECT_EQ(fa.metadata.at(k), fb.metadata.at(k)) << k;
  auto la = read_lines((a / "metrics.jsonl").string()), lb = read_lines((b / "metrics.jsonl").string());
  ASSERT_EQ(la.size(), lb.size());
  const std::vector<std::string> timing = {"train_seconds", "val_seconds", "images_per_second"};
  for (size_t i = 0; i < la.size(); ++i) EXPECT_EQ(without_fields(la[i], timing), without_fields(lb[i], timing));
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

// A run stopped mid-epoch (--time-limit before its first iteration, then
// --stop-after inside an epoch, resumed each time) ends with exactly the weights,
// optimizer state, RNG states and metrics of an uninterrupted run; every stop
// exits with status 3 and leaves a checkpoint.
class MidEpochResume : public ::testing::TestWithParam<StudyKind> {};

TEST_P(MidEpochResume, StopsAnywhereAndResumesExactly) {
  const StudyKind kind = GetParam();
  TempDir a("midA"), b("midB"), cache("cache");
  const std::vector<std::string> common = {"--iters", "3", "--batch", "4", "--val-triplets", "12", "--val-tasks",
                                           "6", "--lr", "1e-3", "--seed", "5", "--epochs", "2", "--dropout", "0.2"};
  ASSERT_EQ(run_study(kind, base_args(a.str(), cache.str()) + common).rc, 0);

  // 1. A time limit shorter than one checkpoint write: stops before the first iteration.
  RunResult r = run_study(kind, base_args(b.str(), cache.str()) + common + std::vector<std::string>{"--time-limit", "0.5"});
  ASSERT_EQ(r.rc, 3);
  mn::nn::SafetensorsFile f0 = mn::nn::read_safetensors(b / "last.safetensors");
  EXPECT_EQ(f0.metadata.at("epoch"), "0");
  EXPECT_EQ(f0.metadata.at("iter"), "0");
  // 2. Four more iterations: epoch 1 (3 iterations, validated, checkpointed) and one of epoch 2.
  r = run_study(kind, base_args(b.str(), cache.str()) + common + std::vector<std::string>{"--resume", "--stop-after", "4"});
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
TEST(OmniglotStudy, HelpListsEveryFlag) {
  testing::internal::CaptureStdout();
  int rc = run_study(StudyKind::Triplet, {"--help"}).rc;
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  for (const char* flag : {"--loss", "--margin", "--global-l", "--global-t", "--global-g", "--sampling", "--share",
                           "--activation", "--input-norm", "--lrn", "--batchnorm", "--dropout", "--augment",
                           "--optimizer", "--lr", "--epochs", "--iters", "--batch", "--seed", "--device",
                           "--data-dir", "--out-dir", "--resume", "--config", "--evaluate", "--test-dir"})
    EXPECT_NE(out.find(std::string(flag) + " "), std::string::npos) << "--help does not list " << flag;
  EXPECT_NE(out.find("default"), std::string::npos);

  testing::internal::CaptureStdout();
  rc = run_study(StudyKind::Siamese, {"--help"}).rc;
  out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  for (const char* flag : {"--optimizer", "--lr", "--augment", "--epochs", "--resume", "--evaluate", "--test-dir"})
    EXPECT_NE(out.find(std::string(flag) + " "), std::string::npos) << "siamese --help does not list " << flag;
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
  // The siamese binary has no triplet loss flag.
  RunResult r = run_study(StudyKind::Siamese, {"--loss", "global"}, true);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--loss"), std::string::npos) << r.err;
}

TEST(OmniglotStudy, MissingDataDirIsAClearError) {
  TempDir out("nodata");
  RunResult r = run_study(StudyKind::Triplet,
                          {"--data-dir", out / "no_such_folder", "--out-dir", out / "o", "--device", "cpu"}, true);
  EXPECT_EQ(r.rc, 1);
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
