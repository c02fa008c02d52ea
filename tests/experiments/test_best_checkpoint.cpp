// summary.json and the final test refer to the same checkpoint: the harness
// stores the XXH3 hash of best.safetensors when it writes it, summary.json
// names it, and a best.safetensors that is not the file written for the best
// epoch (a kill between the two checkpoint writes, a replaced file) is refused
// instead of being scored.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "experiments/common/file_hash.h"
#include "experiments/common/json.h"
#include "nn/checkpoint.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {

using namespace mn_test_exp;

const std::vector<std::string> kSmall = {"--iters", "2", "--batch", "4", "--val-triplets", "12", "--val-tasks", "6",
                                         "--lr", "1e-3", "--seed", "5"};

TEST(BestCheckpoint, FileHashIsTheXxh3OfTheBytes) {
  TempDir d("hash");
  const std::string a = d / "a", b = d / "b";
  { std::ofstream(a) << "abc"; }
  { std::ofstream(b) << "abd"; }
  EXPECT_EQ(mn::exp::file_xxh3(a).size(), 16u);
  EXPECT_EQ(mn::exp::file_xxh3(a), mn::exp::file_xxh3(a));
  EXPECT_NE(mn::exp::file_xxh3(a), mn::exp::file_xxh3(b));
  // XXH3-64 of the empty input is 2d06800538d394c2 (xxHash's reference value).
  const std::string e = d / "empty";
  { std::ofstream(e) << ""; }
  EXPECT_EQ(mn::exp::file_xxh3(e), "2d06800538d394c2");
  EXPECT_THROW(mn::exp::file_xxh3(d / "missing"), mn::Error);
}

TEST(BestCheckpoint, SummaryNamesTheHashOfTheEvaluatedFile) {
  TempDir out("best"), cache("bestcache");
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(out.str(), cache.str()) + kSmall +
                                              std::vector<std::string>{"--epochs", "2"}).rc, 0);
  const mn::exp::Json sum = mn::exp::Json::parse(read_text(out / "summary.json"));
  ASSERT_TRUE(sum.contains("best_checkpoint")) << sum.dump();
  const auto& b = sum["best_checkpoint"];
  EXPECT_EQ(b["file"], "best.safetensors");
  EXPECT_EQ(b["epoch"], sum["best_epoch"]);
  EXPECT_TRUE(b["verified"].get<bool>());
  EXPECT_EQ(b["xxh3_64"].get<std::string>(), mn::exp::file_xxh3(out / "best.safetensors"));
  // last.safetensors carries the same hash (what a --resume verifies against).
  EXPECT_EQ(mn::nn::read_safetensors_metadata(out / "last.safetensors").at("best_xxh3"),
            b["xxh3_64"].get<std::string>());
}

TEST(BestCheckpoint, FinalTestRefusesABestFileFromAnotherModel) {
  TempDir out("bestswap"), other("bestother"), cache("bestcache2");
  const auto args = base_args(out.str(), cache.str()) + kSmall + std::vector<std::string>{"--epochs", "1"};
  ASSERT_EQ(run_study(StudyKind::Triplet, args).rc, 0);
  // Another model's best.safetensors in its place (what an interrupted write
  // of a new best could leave next to the older last.safetensors).
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(other.str(), cache.str()) + kSmall +
                                              std::vector<std::string>{"--epochs", "1", "--seed", "9"}).rc, 0);
  fs::copy_file(other / "best.safetensors", out / "best.safetensors", fs::copy_options::overwrite_existing);
  RunResult r = run_study(StudyKind::Triplet, args + std::vector<std::string>{"--resume"}, true);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("best.safetensors"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("content hash"), std::string::npos) << r.err;
  // An untouched run resumed after its last epoch passes the check (the hash
  // comes back from last.safetensors).
  TempDir again("bestagain");
  const auto args2 = base_args(again.str(), cache.str()) + kSmall + std::vector<std::string>{"--epochs", "1"};
  ASSERT_EQ(run_study(StudyKind::Triplet, args2).rc, 0);
  RunResult ok = run_study(StudyKind::Triplet, args2 + std::vector<std::string>{"--resume"}, true);
  EXPECT_EQ(ok.rc, 0) << ok.err;
}

}  // namespace
