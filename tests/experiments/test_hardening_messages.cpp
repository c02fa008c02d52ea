// Issue 37: the Omniglot study's last silent answers and vague errors. Each case
// runs the study's main in-process and checks that a user now gets a clear,
// named error (or a named warning where going on is right): non-finite weights
// and distances, --test-way over small alphabets, architecture metadata that
// disagrees with the tensors, --train-max-drawer 1, --resume after a
// --time-limit too short for one step, a stopped epoch longer than --iters,
// and Lake's runs of another image size. (The data readers' cases are in
// tests/data/test_bad_inputs.cpp, the checkpoint reader's in
// tests/nn/test_checkpoint.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "data/image_io.h"
#include "experiments/common/json.h"
#include "nn/checkpoint.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {

using namespace mn_test_exp;
using mn::Tensor;
using mn::exp::Json;

const std::vector<std::string> kTiny = {"--iters", "2", "--batch", "4", "--val-triplets", "12", "--val-tasks", "6"};

// One small trained Koch net (with batch-norm, so that its tensors tell whether
// the model has it), trained once per test binary: best.safetensors.
const std::string& trained_checkpoint() {
  static TempDir* dir = [] {
    auto* d = new TempDir("h37_trained");
    const RunResult r = run_study(StudyKind::Triplet, base_args(d->str(), *d / "cache") + kTiny +
                                                          std::vector<std::string>{"--epochs", "1", "--batchnorm"});
    EXPECT_EQ(r.rc, 0);
    return d;
  }();
  static const std::string path = *dir / "best.safetensors";
  return path;
}

// Rewrites a checkpoint in place: `edit` may change its tensors and its metadata's config.
void rewrite(const std::string& path, const std::function<void(mn::nn::SafetensorsFile&, Json&)>& edit) {
  mn::nn::SafetensorsFile f = mn::nn::read_safetensors(path);
  Json cfg = Json::parse(f.metadata.at("config"));
  edit(f, cfg);
  f.metadata["config"] = cfg.dump();
  mn::nn::write_safetensors(path, mn::nn::NamedTensors(f.tensors.begin(), f.tensors.end()), f.metadata);
}

std::string copy_checkpoint(const TempDir& to, const std::string& name) {
  const std::string p = to / name;
  fs::copy_file(trained_checkpoint(), p, fs::copy_options::overwrite_existing);
  return p;
}

std::vector<std::string> evaluate_args(const std::string& ckpt, const std::string& out, const std::string& cache) {
  // (--data-dir: the synthetic tree, without all_runs/: no Lake test.)
  return {"--evaluate", ckpt, "--out-dir", out, "--cache-dir", cache, "--device", "cpu", "--test-dir",
          omniglot_root() + "/images_evaluation", "--test-way", "5", "--test-tasks", "4", "--data-dir", omniglot_root()};
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

// Item 1: NaN or Inf weights are refused at load, for --evaluate and --resume
// alike, naming the file and the tensor (it used to score them: 5 % on Lake's runs).
TEST(Hardening37, NonFiniteWeightsAreRefusedAtLoad) {
  TempDir run("h37_nan"), ev("h37_nan_ev");
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(run.str(), run / "cache") + kTiny +
                                              std::vector<std::string>{"--stop-after", "1"}).rc, 3);
  const std::string last = run / "last.safetensors";
  rewrite(last, [](mn::nn::SafetensorsFile& f, Json&) { f.tensors.at("branch.dense.weight").data<float>()[3] = NAN; });
  RunResult r = run_study(StudyKind::Triplet, base_args(run.str(), run / "cache") + std::vector<std::string>{"--resume"},
                          true);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_TRUE(has(r.err, last) && has(r.err, "'branch.dense.weight' holds NaN") && has(r.err, "not finite")) << r.err;
  r = run_study(StudyKind::Triplet, evaluate_args(last, ev.str(), run / "cache"), true);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_TRUE(has(r.err, last) && has(r.err, "'branch.dense.weight' holds NaN")) << r.err;
  EXPECT_FALSE(fs::exists(ev / "evaluation.json"));
}

// Item 1: distances that are not finite (finite weights whose outputs overflow)
// are an error naming the evaluation, not a score.
TEST(Hardening37, NonFiniteDistancesAreAnErrorNamingTheEvaluation) {
  TempDir run("h37_inf"), ev("h37_inf_ev");
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(run.str(), run / "cache") + kTiny +
                                              std::vector<std::string>{"--stop-after", "1", "--no-sigmoid-embedding"}).rc,
            3);
  const std::string last = run / "last.safetensors";
  rewrite(last, [](mn::nn::SafetensorsFile& f, Json&) {
    Tensor& w = f.tensors.at("branch.dense.weight");
    for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = 3e38f;  // finite, but w x overflows
  });
  const RunResult r = run_study(StudyKind::Triplet, evaluate_args(last, ev.str(), run / "cache"), true);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_TRUE(has(r.err, "--test-dir tasks: the network's distances hold")) << r.err;
  EXPECT_TRUE(has(r.err, "no accuracy can be computed")) << r.err;
}

// Item 2: --test-way larger than some alphabets' character counts names the
// alphabets left out (stderr, report and evaluation.json).
TEST(Hardening37, TestWayNamesTheAlphabetsLeftOut) {
  TempDir ev("h37_way"), test_dir("h37_way_dir");
  const fs::path src = fs::path(omniglot_root()) / "images_evaluation";
  fs::copy(src / "Evaluation_1", test_dir.path / "Evaluation_1", fs::copy_options::recursive);
  fs::create_directories(test_dir.path / "Evaluation_2");
  for (const char* c : {"character01", "character02", "character03", "character04"})
    fs::copy(src / "Evaluation_2" / c, test_dir.path / "Evaluation_2" / c, fs::copy_options::recursive);
  std::vector<std::string> args = evaluate_args(trained_checkpoint(), ev.str(), ev / "cache");
  args[9] = test_dir.str();  // --test-dir
  args[11] = "6";            // --test-way: Evaluation_2 has only 4 characters
  testing::internal::CaptureStdout();
  const RunResult r = run_study(StudyKind::Triplet, args, true);
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.err, "warning: --test-way 6: 1 of the 2 alphabets") && has(r.err, "Evaluation_2 (4 characters)"))
      << r.err;
  EXPECT_TRUE(has(out, "left out of the --test-dir tasks (fewer than --test-way 6 characters): Evaluation_2")) << out;
  const Json ej = Json::parse(read_text(ev / "evaluation.json"));
  EXPECT_EQ(ej["test_dir"]["alphabets_left_out"], Json::array({"Evaluation_2 (4 characters)"}));
  // Every alphabet large enough: no warning.
  args[11] = "4";
  const RunResult all = run_study(StudyKind::Triplet, args, true);
  EXPECT_EQ(all.rc, 0);
  EXPECT_FALSE(has(all.err, "left out")) << all.err;
}

// Item 5: architecture fields of the metadata that disagree with the tensors.
// The flags win; a tensor that does not fit is an error naming it and where the
// flags came from, tensors the model does not have are a warning.
TEST(Hardening37, ArchitectureMetadataThatDisagreesWithTheTensors) {
  TempDir ev("h37_arch");
  const std::string edited = copy_checkpoint(ev, "edited.safetensors");
  rewrite(edited, [](mn::nn::SafetensorsFile&, Json& cfg) { cfg["embedding"] = 16; });  // the tensors say 32
  RunResult r = run_study(StudyKind::Triplet, evaluate_args(edited, ev / "out", ev / "cache"), true);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_TRUE(has(r.err, "'branch.dense.weight' of shape") && has(r.err, "the architecture flags build the model and "
                                                                         "win over the file")) << r.err;
  EXPECT_TRUE(has(r.err, "the model was built from its metadata config, which therefore disagrees")) << r.err;
  // An older version's metadata without 'batchnorm': the default (false) wins
  // and the file's batch-norm tensors are named as ignored.
  const std::string old = copy_checkpoint(ev, "old.safetensors");
  rewrite(old, [](mn::nn::SafetensorsFile&, Json& cfg) { cfg.erase("batchnorm"); });
  r = run_study(StudyKind::Triplet, evaluate_args(old, ev / "out", ev / "cache"), true);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.err, "warning: --evaluate: '" + old + "' holds") && has(r.err, "'branch.bn1.")) << r.err;
  EXPECT_TRUE(has(r.err, "these weights are ignored") && has(r.err, "--batchnorm false (the default; the file's config "
                                                                     "has no 'batchnorm'")) << r.err;
  // The unedited checkpoint: no word.
  r = run_study(StudyKind::Triplet, evaluate_args(trained_checkpoint(), ev / "out", ev / "cache"), true);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(has(r.err, "warning")) << r.err;
}

// Item 6: --train-max-drawer 1 (one drawing per character, no positive pair)
// names the flag and the smallest value that works, before any data is loaded.
TEST(Hardening37, TrainMaxDrawerOneNamesTheSmallestValue) {
  TempDir run("h37_drawer");
  const RunResult r = run_study(StudyKind::Siamese, base_args(run.str(), run / "cache") + kTiny +
                                                        std::vector<std::string>{"--train-max-drawer", "1"}, true);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_TRUE(has(r.err, "--train-max-drawer = 1 is out of range: it must be in [2, 20]")) << r.err;
}

// Item 7: a --time-limit too short for one step saves nothing; --resume then
// says so and why, instead of only "cannot open".
TEST(Hardening37, ResumeAfterATimeLimitTooShortExplainsWhyNothingWasSaved) {
  TempDir run("h37_limit"), empty("h37_limit_empty");
  RunResult r = run_study(StudyKind::Triplet, base_args(run.str(), run / "cache") + kTiny +
                                                  std::vector<std::string>{"--time-limit", "0.001"}, true);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_TRUE(has(r.err, "too short for even one training step") && has(r.err, "nothing was saved")) << r.err;
  r = run_study(StudyKind::Triplet, base_args(run.str(), run / "cache") + std::vector<std::string>{"--resume"}, true);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_TRUE(has(r.err, "last.safetensors") && has(r.err, "stopped before it saved anything")) << r.err;
  EXPECT_TRUE(has(r.err, "--time-limit 0.001 s (config.txt) was too short for even one training step")) << r.err;
  // No run at all in the folder.
  r = run_study(StudyKind::Triplet, base_args(empty.str(), run / "cache") + std::vector<std::string>{"--resume"}, true);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_TRUE(has(r.err, "no run was started in --out-dir")) << r.err;
}

// Item 8: a checkpoint stopped later in its epoch than --iters allows names --iters
// (reachable when its stored configuration lacks iters: an older version's).
TEST(Hardening37, ResumeBeyondTheEpochNamesIters) {
  TempDir run("h37_iters");
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(run.str(), run / "cache") + kTiny +
                                              std::vector<std::string>{"--iters", "3", "--stop-after", "2"}).rc, 3);
  rewrite(run / "last.safetensors", [](mn::nn::SafetensorsFile&, Json& cfg) { cfg.erase("iters"); });
  const RunResult r = run_study(StudyKind::Triplet, base_args(run.str(), run / "cache") +
                                                        std::vector<std::string>{"--resume", "--iters", "1"}, true);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_TRUE(has(r.err, "stopped at step 2 of an epoch, but an epoch has 1 steps now (--iters 1)")) << r.err;
  EXPECT_TRUE(has(r.err, "give the stopped run's --iters (at least 2)")) << r.err;
}

// Item 9: Lake's runs of another image size name a file and the expected size
// (the error came from resize_area without either).
TEST(Hardening37, LakeRunsOfAnotherSizeNameTheFileAndTheSize) {
  TempDir data("h37_lake");
  mn::data::GrayImage img;
  img.height = img.width = 64;
  img.pixels.assign(64 * 64, 255);
  for (int i = 0; i < 64; ++i) img.pixels[static_cast<size_t>(i) * 64 + i] = 0;
  for (int run = 1; run <= 20; ++run) {
    char rn[16];
    std::snprintf(rn, sizeof rn, "run%02d", run);
    fs::create_directories(data.path / "all_runs" / rn / "training");
    fs::create_directories(data.path / "all_runs" / rn / "test");
    std::string labels;
    for (int k = 1; k <= 2; ++k) {
      char q[64], c[64];
      std::snprintf(q, sizeof q, "%s/test/item%02d.png", rn, k);
      std::snprintf(c, sizeof c, "%s/training/class%02d.png", rn, k);
      mn::data::write_png_gray((data.path / "all_runs" / q).string(), img, true);
      mn::data::write_png_gray((data.path / "all_runs" / c).string(), img, true);
      labels += std::string(q) + " " + c + "\n";
    }
    std::FILE* f = std::fopen((data.path / "all_runs" / rn / "class_labels.txt").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(labels.c_str(), f);
    std::fclose(f);
  }
  const RunResult r = run_study(StudyKind::Triplet, {"--evaluate", trained_checkpoint(), "--data-dir", data.str(),
                                                     "--out-dir", data / "out", "--device", "cpu"}, true);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_TRUE(has(r.err, data / "all_runs/run01/test/item01.png") && has(r.err, "is 64x64, expected 105x105")) << r.err;
}
