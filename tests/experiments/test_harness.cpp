// Tests of the study harness (experiments/common/harness.h) through the
// Omniglot studies on the synthetic data of omniglot_fixture.h, on the CPU:
//   * the resume contract: a changed --loss is refused naming the flag and
//     both values, a changed --epochs continues, omitted flags are restored;
//   * malformed or missing checkpoint metadata, and a checkpoint path that is
//     a folder, are errors naming the file and the key;
//   * --evaluate with a checkpoint of the other network kind is refused;
//   * --time-limit is honoured within a few seconds, also when the next
//     validation would overrun it, and a limit too short for one step is an error;
//   * flag ranges and input paths are checked before any data is loaded;
//   * a run's config.txt read back with --config reproduces the configuration;
//   * summary.json and report.md are written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "experiments/common/json.h"
#include "nn/checkpoint.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {

using namespace mn_test_exp;

// A small, quick run configuration.
const std::vector<std::string> kSmall = {"--iters", "3", "--batch", "4", "--val-triplets", "12", "--val-tasks", "6",
                                         "--lr", "1e-3", "--seed", "3"};

// Rewrites `path` with `edit` applied to its metadata (tensors unchanged).
template <typename F>
void edit_metadata(const std::string& path, F edit) {
  mn::nn::SafetensorsFile f = mn::nn::read_safetensors(path);
  edit(f.metadata);
  mn::nn::NamedTensors t(f.tensors.begin(), f.tensors.end());
  mn::nn::write_safetensors(path, t, f.metadata);
}

TEST(StudyHarness, ResumeRefusesAChangedFlagAndRestoresTheOthers) {
  TempDir out("contract"), cache("cache");
  const auto first = base_args(out.str(), cache.str()) + kSmall +
                     std::vector<std::string>{"--epochs", "1", "--loss", "kumar", "--margin", "0.05"};
  ASSERT_EQ(run_study(StudyKind::Triplet, first).rc, 0);

  // A different --loss: a usage error naming the flag and both values; nothing written.
  const std::string metrics_before = read_text(out / "metrics.jsonl");
  RunResult r = run_study(StudyKind::Triplet, base_args(out.str(), cache.str()) + kSmall +
                              std::vector<std::string>{"--epochs", "2", "--loss", "schroff", "--resume"}, true);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("--loss"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("schroff"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("kumar"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(out / "metrics.jsonl"), metrics_before);

  // A longer --epochs continues; --loss and --margin, not given, come from the checkpoint.
  r = run_study(StudyKind::Triplet, base_args(out.str(), cache.str()) +
                                        std::vector<std::string>{"--epochs", "2", "--resume"}, true);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(read_lines(out / "metrics.jsonl").size(), 2u);
  const std::string used = read_text(out / "config.txt");
  EXPECT_NE(used.find("loss = kumar\n"), std::string::npos) << used;
  EXPECT_NE(used.find("margin = 0.05\n"), std::string::npos) << used;
  EXPECT_NE(used.find("iters = 3\n"), std::string::npos) << used;
  EXPECT_NE(used.find("epochs = 2\n"), std::string::npos) << used;
  // The same value spelled differently is not a change.
  r = run_study(StudyKind::Triplet, base_args(out.str(), cache.str()) +
                                        std::vector<std::string>{"--epochs", "2", "--margin", "5e-2", "--resume"}, true);
  EXPECT_EQ(r.rc, 0) << r.err;
}

TEST(StudyHarness, BadCheckpointMetadataNamesFileAndKey) {
  TempDir out("badmeta"), cache("cache");
  const auto args = base_args(out.str(), cache.str()) + kSmall + std::vector<std::string>{"--epochs", "2"};
  ASSERT_EQ(run_study(StudyKind::Triplet, args + std::vector<std::string>{"--epochs", "1"}).rc, 0);
  const std::string ckpt = out / "last.safetensors";
  const std::string good = read_text(ckpt);
  auto restore = [&] {
    std::ofstream(ckpt, std::ios::binary | std::ios::trunc) << good;
  };
  struct Case {
    const char* key;
    const char* value;  // nullptr: remove the key
  };
  const Case cases[] = {{"epoch", "three"},        {"epoch", "-4"},   {"iter", nullptr},
                        {"best_score", "x"},       {"config", "{not json"}, {"study", nullptr},
                        {"rng.sample.offset", "99999999999999999999999"}, {"partial.names", nullptr}};
  for (const auto& c : cases) {
    restore();
    edit_metadata(ckpt, [&](mn::nn::Metadata& md) {
      if (c.value) md[c.key] = c.value;
      else md.erase(c.key);
    });
    RunResult r = run_study(StudyKind::Triplet, args + std::vector<std::string>{"--resume"}, true);
    EXPECT_NE(r.rc, 0) << c.key;
    EXPECT_NE(r.rc, 3) << c.key;
    EXPECT_NE(r.err.find(c.key), std::string::npos) << "key " << c.key << ": " << r.err;
    EXPECT_NE(r.err.find("last.safetensors"), std::string::npos) << "key " << c.key << ": " << r.err;
    EXPECT_EQ(r.err.find("stoll"), std::string::npos) << r.err;
  }
  // A checkpoint path that is a folder.
  std::filesystem::remove(ckpt);
  std::filesystem::create_directories(ckpt);
  RunResult r = run_study(StudyKind::Triplet, args + std::vector<std::string>{"--resume"}, true);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
  r = run_study(StudyKind::Triplet, {"--evaluate", ckpt, "--data-dir", omniglot_root(), "--device", "cpu"}, true);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--evaluate"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
}

TEST(StudyHarness, EvaluateRefusesACheckpointOfTheOtherKind) {
  TempDir out("kind"), cache("cache");
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(out.str(), cache.str()) + kSmall +
                                              std::vector<std::string>{"--epochs", "1"}).rc, 0);
  TempDir ev("kind_eval");
  RunResult r = run_study(StudyKind::Siamese, {"--evaluate", out / "best.safetensors", "--data-dir", omniglot_root(),
                                               "--out-dir", ev.str(), "--cache-dir", cache.str(), "--device", "cpu"},
                          true);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("omniglot_triplet"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("best.safetensors"), std::string::npos) << r.err;
  // Resuming a triplet run with the siamese binary is refused the same way.
  r = run_study(StudyKind::Siamese, base_args(out.str(), cache.str()) + std::vector<std::string>{"--resume"}, true);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("omniglot_triplet"), std::string::npos) << r.err;
}

// A validation much dearer than the training (20000 verification triplets
// against steps of 4): the first validation's cost is estimated from the
// training speed, so the run stops before it rather than overrunning the limit.
TEST(StudyHarness, TimeLimitIsHonouredAlsoBeforeAnExpensiveValidation) {
  TempDir out("tl"), cache("cache");
  // Data loading and the cache are warmed by a first tiny run (not timed).
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args((out / "warm"), cache.str()) + kSmall +
                                              std::vector<std::string>{"--epochs", "1"}).rc, 0);
  // The five training steps must fit in the limit for the stop to fall before
  // the validation; on a slow or loaded machine (CI: ~1 s a step) the limit is
  // doubled until they do. Every try must still stop within the limit + 2 s.
  double limit = 4.0;
  mn::nn::Metadata md;
  for (int attempt = 0; attempt < 4; ++attempt, limit *= 2) {
    const std::string dir = out / ("run" + std::to_string(attempt));
    const auto args = base_args(dir, cache.str()) +
                      std::vector<std::string>{"--iters", "5", "--batch", "4", "--val-triplets", "20000",
                                               "--val-tasks", "6", "--epochs", "1"};
    char limit_text[32];
    std::snprintf(limit_text, sizeof limit_text, "%g", limit);
    RunResult r = run_study(StudyKind::Triplet, args + std::vector<std::string>{"--time-limit", limit_text}, true);
    ASSERT_EQ(r.rc, 3) << r.err;
    // "Within a few seconds": the limit plus 2 s for an under-estimated step.
    EXPECT_LT(r.seconds, limit + 2.0) << "limit " << limit;
    md = mn::nn::read_safetensors_metadata(dir + "/last.safetensors");
    EXPECT_EQ(md.at("epoch"), "0");
    if (md.at("iter") == "5") break;
  }
  EXPECT_EQ(md.at("iter"), "5") << "expected a stop with the validation pending (last limit " << limit << " s)";

  // Training steps alone: a long epoch stops within the limit too.
  const auto long_args = base_args(out / "long", cache.str()) + kSmall +
                         std::vector<std::string>{"--iters", "100000", "--epochs", "1", "--time-limit", "4"};
  RunResult r = run_study(StudyKind::Triplet, long_args, true);
  ASSERT_EQ(r.rc, 3) << r.err;
  EXPECT_LT(r.seconds, 4.0 + 2.0);
  EXPECT_GT(std::stoll(mn::nn::read_safetensors_metadata(out / "long/last.safetensors").at("iter")), 0);
}

TEST(StudyHarness, TimeLimitTooShortForOneStepIsAnError) {
  TempDir out("tl_short"), cache("cache");
  RunResult r = run_study(StudyKind::Siamese, base_args(out.str(), cache.str()) + kSmall +
                                                  std::vector<std::string>{"--epochs", "1", "--time-limit", "0.01"},
                          true);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--time-limit"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("too short"), std::string::npos) << r.err;
}

// Every refusal names the flag and comes before any data is loaded ("data:" is
// the first line StudyData prints).
TEST(StudyHarness, FlagRangesAndPathsAreCheckedBeforeAnyData) {
  TempDir out("ranges"), cache("cache");
  const std::string cfg_dir = out / "cfgdir";
  std::filesystem::create_directories(cfg_dir);
  struct Case {
    StudyKind kind;
    std::vector<std::string> args;
    std::string must_mention;
  };
  const Case cases[] = {
      {StudyKind::Triplet, {"--epochs", "0"}, "--epochs"},
      {StudyKind::Triplet, {"--epochs", "-1"}, "--epochs"},
      {StudyKind::Triplet, {"--iters", "0"}, "--iters"},
      {StudyKind::Triplet, {"--val-tasks", "0"}, "--val-tasks"},
      {StudyKind::Triplet, {"--test-tasks", "0"}, "--test-tasks"},
      {StudyKind::Triplet, {"--val-triplets", "-5"}, "--val-triplets"},
      {StudyKind::Triplet, {"--batch", "1", "--sampling", "batch-hard"}, "--batch"},
      {StudyKind::Siamese, {"--batch", "7"}, "--batch"},
      {StudyKind::Triplet, {"--config", cfg_dir}, "--config"},
      {StudyKind::Triplet, {"--val-tasks", "99999999999"}, "--val-tasks"},
      {StudyKind::Triplet, {"--epochs", "99999999999999999999999"}, "--epochs"},
      {StudyKind::Triplet, {"--dropout", "1.5"}, "--dropout"},
      {StudyKind::Triplet, {"--width", "0"}, "--width"},
      {StudyKind::Triplet, {"--time-limit", "-3"}, "--time-limit"},
      {StudyKind::Triplet, {"--group-lr", "1,2,3"}, "--group-lr"},
      {StudyKind::Triplet, {"--test-dir", out / "absent"}, "--test-dir"},
      {StudyKind::Triplet, {"--evaluate", out / "absent.safetensors"}, "--evaluate"},
      {StudyKind::Triplet, {"--device", "tpu"}, "--device"},
  };
  for (const auto& c : cases) {
    testing::internal::CaptureStdout();
    RunResult r = run_study(c.kind, base_args(out / "run", cache.str()) + c.args, true);
    const std::string stdout_text = testing::internal::GetCapturedStdout();
    EXPECT_EQ(r.rc, 2) << c.args[0] << " " << c.args[1] << ": " << r.err;
    EXPECT_NE(r.err.find(c.must_mention), std::string::npos) << "stderr: " << r.err;
    EXPECT_EQ(stdout_text.find("data:"), std::string::npos) << c.args[0] << ": data was loaded before the check";
  }
}

// config.txt of a run, given back with --config, gives the same configuration;
// the run also writes summary.json (a JSON object) and report.md.
TEST(StudyHarness, ConfigFileRoundTripAndFinalOutputs) {
  TempDir out("rt"), cache("cache");
  ASSERT_EQ(run_study(StudyKind::Siamese, base_args(out / "a", cache.str()) + kSmall +
                                              std::vector<std::string>{"--epochs", "1", "--optimizer", "sgd",
                                                                       "--group-lr", "1,1,0.5,0.5,0.1,1"}).rc, 0);
  const std::string cfg = read_text(out / "a/config.txt");
  ASSERT_NE(cfg.find("optimizer = sgd\n"), std::string::npos) << cfg;
  std::ofstream(out / "round.cfg") << cfg;
  // out-dir comes from the file too; the command line moves it.
  ASSERT_EQ(run_study(StudyKind::Siamese, {"--config", out / "round.cfg", "--out-dir", out / "b"}).rc, 0);
  std::string again = read_text(out / "b/config.txt");
  const std::string a_dir = "out-dir = " + (out / "a") + "\n", b_dir = "out-dir = " + (out / "b") + "\n";
  ASSERT_NE(again.find(b_dir), std::string::npos) << again;
  again.replace(again.find(b_dir), b_dir.size(), a_dir);
  EXPECT_EQ(again, cfg);
  // Same configuration, same numbers.
  auto la = read_lines(out / "a/metrics.jsonl"), lb = read_lines(out / "b/metrics.jsonl");
  ASSERT_EQ(la.size(), 1u);
  ASSERT_EQ(lb.size(), 1u);
  const std::vector<std::string> timing = {"train_seconds", "val_seconds", "images_per_second"};
  EXPECT_EQ(without_fields(la[0], timing), without_fields(lb[0], timing));

  const auto summary = mn::exp::Json::parse(read_text(out / "b/summary.json"));
  EXPECT_EQ(summary.at("study"), "omniglot_siamese");
  EXPECT_EQ(summary.at("best_epoch"), 1);
  EXPECT_TRUE(summary.at("config").is_object());
  const std::string report = read_text(out / "b/report.md");
  EXPECT_NE(report.find("omniglot_siamese"), std::string::npos) << report;
  EXPECT_NE(report.find("val_one_shot_percent"), std::string::npos) << report;
}

}  // namespace

// config.txt must read back as written, also for free-text values with '#',
// quotes, backslashes, newlines or outer spaces (written "quoted"); comments
// and the `key: value` form still work.
TEST(StudyHarness, ConfigTextQuotesWhatWouldNotReadBack) {
  auto make = [] {
    mn::exp::Flags f("t", "t");
    f.add_string("out-dir", "runs/x", "free text");
    f.add_int("epochs", 3, "n", 1, 100);
    f.add_bool("resume", false, "b");
    return f;
  };
  for (const std::string v : {"runs/#1", " lead and trail ", "a\"b\\c", "two\nlines", "plain"}) {
    mn::exp::Flags f = make();
    f.set_exact("out-dir", v, mn::exp::Flags::Origin::CommandLine, "test");
    const std::string text = f.to_config();
    mn::exp::Flags g = make();
    g.load_config_text(text, "config.txt");
    EXPECT_EQ(g.str("out-dir"), v) << text;
    EXPECT_EQ(g.to_json(), f.to_json());
  }
  mn::exp::Flags h = make();
  h.load_config_text("# comment\nepochs: 7   # trailing comment\n--resume = true\nout-dir = \"q#r\"  # c\n", "c.cfg");
  EXPECT_EQ(h.i64("epochs"), 7);
  EXPECT_TRUE(h.flag("resume"));
  EXPECT_EQ(h.str("out-dir"), "q#r");
  EXPECT_THROW(h.load_config_text("out-dir = \"open\n", "c.cfg"), mn::Error);
  EXPECT_THROW(h.load_config_text("out-dir = \"a\" b\n", "c.cfg"), mn::Error);
  EXPECT_THROW(h.load_config_text("epochs # = 3\n", "c.cfg"), mn::Error);
}

// "--x applies only to ..." checks ask user_changed: set by the user to something
// other than the default. A run's config.txt holds every flag, defaults included,
// so a conv4 run of either binary (whose config lists Koch's --width, and a Koch
// run's lists --channels) must read back without tripping them.
TEST(StudyHarness, FlagsThatDoNotApplyAreRefusedOnlyWhenChanged) {
  mn::exp::Flags f("t", "t");
  f.add_int("channels", 64, "n", 1, 4096);
  f.add_double("width", 1.0, "x", 0.01, 16.0);
  f.add_bool("lrn", false, "b");
  EXPECT_FALSE(f.user_changed("channels"));
  f.load_config_text("channels = 64\nwidth = 1e0\nlrn = false\n", "config.txt");
  for (const char* k : {"channels", "width", "lrn"}) {
    EXPECT_TRUE(f.user_set(k)) << k;
    EXPECT_FALSE(f.user_changed(k)) << k;
  }
  f.set("channels", "8", mn::exp::Flags::Origin::CommandLine, "command line");
  f.set("width", "0.5", mn::exp::Flags::Origin::Config, "c.cfg:2");
  f.set("lrn", "true", mn::exp::Flags::Origin::CommandLine, "command line");
  for (const char* k : {"channels", "width", "lrn"}) EXPECT_TRUE(f.user_changed(k)) << k;
  f.set("channels", "16", mn::exp::Flags::Origin::Preset, "cpu-demo preset");
  EXPECT_FALSE(f.user_changed("channels")) << "a preset is not the user";

  TempDir out("rt_conv4"), cache("cache");
  for (const StudyKind kind : {StudyKind::Triplet, StudyKind::Siamese}) {
    const std::string a = out / (kind == StudyKind::Triplet ? "tri_a" : "sia_a");
    const std::string b = out / (kind == StudyKind::Triplet ? "tri_b" : "sia_b");
    RunResult first = run_study(kind, std::vector<std::string>{"--data-dir", omniglot_root(), "--out-dir", a, "--cache-dir", cache.str(),
                                       "--device", "cpu", "--preset", "full", "--embedding", "32", "--val-way", "5",
                                       "--eval-batch", "64", "--epochs", "1", "--trunk", "conv4", "--channels", "8",
                                       "--image-size", "28"} + kSmall);
    ASSERT_EQ(first.rc, 0) << first.err;
    std::ofstream(out / "round.cfg") << read_text(a + "/config.txt");
    RunResult r = run_study(kind, {"--config", out / "round.cfg", "--out-dir", b});
    EXPECT_EQ(r.rc, 0) << r.err;
  }
}

// Flag values go into JSON (checkpoints, summary.json): text that is not UTF-8
// is refused naming the flag (found by fuzz_config: it escaped as a JSON
// type_error before).
TEST(StudyHarness, NonUtf8FlagValuesAreRefusedNamingTheFlag) {
  mn::exp::Flags f("t", "t");
  f.add_string("out-dir", "runs/x", "free text");
  try {
    f.set("out-dir", std::string("runs/\xff\xfe"), mn::exp::Flags::Origin::CommandLine, "command line");
    FAIL() << "no throw";
  } catch (const mn::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--out-dir"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("UTF-8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f.load_config_text("out-dir = a\xc0\xafz\n", "c.cfg"), mn::Error);  // overlong '/'
  f.set("out-dir", "runs/caf\xc3\xa9/\xe2\x82\xac", mn::exp::Flags::Origin::CommandLine, "command line");
  EXPECT_NE(f.to_json().find("caf"), std::string::npos);
}
