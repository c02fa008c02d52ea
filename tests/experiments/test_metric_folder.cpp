// Your own images: the retrieval metrics on hand-made embeddings, metric_train on a
// synthetic folder (trains, stops, resumes, reports), metric_embed (embeddings with
// their names, neighbours, metrics, errors), and the metrics against numpy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "experiments/common/grid_util.h"
#include "experiments/common/harness.h"
#include "experiments/common/retrieval.h"
#include "experiments/metric/embed.h"
#include "experiments/metric/folder_study.h"
#include "nn/checkpoint.h"
#include "tests/common/image_folder_fixture.h"
#include "tests/experiments/metric_fixture.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {
using namespace mn;
using namespace mn::exp;
using mn_test_exp::read_lines;
using mn_test_exp::read_text;
using mn_test_exp::TempDir;
namespace fs = std::filesystem;

Tensor column(const std::vector<double>& v) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size()), 1}).to(DType::F32);
}

// 1-d embeddings worked by hand. a0 = 0, a1 = 3 (class 0); b0 = 1, b1 = 10 (class 1).
// Nearest first: a0 -> b0 a1 b1; a1 -> b0 a0 b1; b0 -> a0 a1 b1; b1 -> a1 b0 a0.
// Every query's nearest is of the other class (Recall@1 0, MAP@R 0 with R = 1); within
// 2, a0, a1 and b1 find their pair, b0 does not (Recall@2 75); within 3 all (100).
TEST(Retrieval, HandWorkedRecallAndMapAtR) {
  const RetrievalMetrics m = retrieval_metrics(column({0, 3, 1, 10}), {0, 0, 1, 1}, {1, 2, 3});
  EXPECT_DOUBLE_EQ(m.recall_at.at(1), 0.0);
  EXPECT_DOUBLE_EQ(m.recall_at.at(2), 75.0);
  EXPECT_DOUBLE_EQ(m.recall_at.at(3), 100.0);
  EXPECT_DOUBLE_EQ(m.map_at_r, 0.0);
  EXPECT_EQ(m.queries, 4);
  // R = 2: class 0 = {0, 1, 5}, class 1 = {2}. From 0: 1 (hit), 2 (miss): AP = (1/2)(1/1) = 0.5;
  // from 1: 0 (hit), 2 (miss): 0.5; from 5: 2 (miss), 1 (hit): (1/2)(1/2) = 0.25. Class 1
  // has no other item: left out. MAP@R = (0.5 + 0.5 + 0.25) / 3; R-precision 1/2 each.
  const RetrievalMetrics r = retrieval_metrics(column({0, 1, 5, 2}), {0, 0, 0, 1}, {1});
  EXPECT_NEAR(r.map_at_r, 100.0 * 1.25 / 3, 1e-9);
  EXPECT_NEAR(r.r_precision, 50.0, 1e-9);
  EXPECT_NEAR(r.recall_at.at(1), 100.0 * 2 / 3, 1e-9);
  EXPECT_EQ(r.skipped, 1);
  // Cosine: direction alone counts.
  const Tensor e = Tensor::from_vector(std::vector<double>{1, 0, 5, 0.1, 0, 1, 0, 7}, {4, 2}).to(DType::F32);
  const RetrievalMetrics c = retrieval_metrics(e, {0, 0, 1, 1}, {1}, true);
  EXPECT_DOUBLE_EQ(c.recall_at.at(1), 100.0);
  EXPECT_DOUBLE_EQ(c.map_at_r, 100.0);
}

TEST(Retrieval, OneShotAndNeighbours) {
  // Tight, far-apart clusters: every task is right.
  std::vector<double> v;
  std::vector<int32_t> labels;
  for (int c = 0; c < 6; ++c)
    for (int i = 0; i < 3; ++i) v.push_back(100.0 * c + i), labels.push_back(c);
  EXPECT_DOUBLE_EQ(one_shot_accuracy(column(v), labels, 5, 200, 1), 100.0);
  EXPECT_THROW(one_shot_accuracy(column(v), labels, 7, 10, 1), Error);  // 6 classes for 7-way tasks
  // Random points: chance is 1/5; 2,000 tasks put it within 20 +- 3 (> 3 sd).
  std::mt19937 rng(7);
  std::normal_distribution<double> normal;
  std::vector<double> r;
  std::vector<int32_t> rl;
  for (int i = 0; i < 300; ++i) r.push_back(normal(rng)), r.push_back(normal(rng)), rl.push_back(i % 30);
  const Tensor re = Tensor::from_vector(r, {300, 2}).to(DType::F32);
  const double chance = one_shot_accuracy(re, rl, 5, 2000, 3);
  EXPECT_GT(chance, 17.0);
  EXPECT_LT(chance, 23.0);
  const Neighbours nb = nearest_neighbours(column({0, 3, 1, 10}), column({0, 3, 1, 10}), 2, false, true);
  EXPECT_EQ(nb.index[0], (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(nb.index[3], (std::vector<int64_t>{1, 2}));
  EXPECT_DOUBLE_EQ(nb.distance[3][0], 7.0);
}

int train(const std::vector<std::string>& args) { return mn_test_exp::metric_train(args); }
int embed(const std::vector<std::string>& args) { return mn_test_exp::metric_embed(args); }

std::vector<std::string> tiny(const std::string& data, const std::string& out) {
  return {"--data-dir", data, "--out-dir", out, "--device", "cpu", "--cache-dir", "none", "--image-size", "16",
          "--width", "8", "--embedding", "8", "--classes-per-batch", "3", "--per-class", "2", "--iters", "3",
          "--val-classes", "0.25", "--test-classes", "0.25", "--one-shot-way", "2", "--one-shot-tasks", "20",
          "--loss", "schroff", "--miner", "semi-hard-or-hardest"};
}

TEST(MetricTrain, TrainsStopsResumesAndTestsOnHeldOutClasses) {
  TempDir data("folder"), out("mt");
  test::make_image_folder(data.str(), 8, 4, 16);
  std::vector<std::string> args = tiny(data.str(), out.str());
  args.insert(args.end(), {"--epochs", "2"});
  std::vector<std::string> stop = args;
  stop.insert(stop.end(), {"--stop-after", "4"});
  ASSERT_EQ(train(stop), kExitResumable);
  EXPECT_EQ(read_lines(out / "metrics.jsonl").size(), 1u);
  std::vector<std::string> resume = args;
  resume.push_back("--resume");
  ASSERT_EQ(train(resume), kExitOk);
  const std::vector<std::string> lines = read_lines(out / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  for (const char* k : {"val_recall_at_1", "val_recall_at_8", "val_map_at_r", "val_r_precision",
                        "val_one_shot_percent", "train_loss"})
    EXPECT_NE(lines[1].find(k), std::string::npos) << k << " in " << lines[1];
  const Json s = read_json_file(out / "summary.json");
  ASSERT_TRUE(s.contains("test")) << s.dump();
  EXPECT_EQ(s["test"]["set"], "test");
  EXPECT_EQ(s["test"]["classes"], 2);  // 8 classes: 2 validation, 2 test, 4 training
  EXPECT_EQ(s["test"]["images"], 8);
  for (const char* k : {"recall_at_1", "map_at_r", "one_shot_percent"}) {
    ASSERT_TRUE(s["test"][k].is_number()) << k;
    EXPECT_GE(s["test"][k].get<double>(), 0.0);
    EXPECT_LE(s["test"][k].get<double>(), 100.0);
  }
  EXPECT_NE(read_text(out / "report.md").find("Final test on the 2 test classes"), std::string::npos);
  // Bad flags are refused before any data is read, naming the flag.
  TempDir out2("mt2");
  std::vector<std::string> bad = tiny(data.str(), out2.str());
  bad.insert(bad.end(), {"--classes-per-batch", "9"});
  EXPECT_EQ(train(bad), kExitFailed);  // 4 training classes cannot give 9 per batch
  std::vector<std::string> koch = tiny(data.str(), out2.str());
  koch.insert(koch.end(), {"--trunk", "koch"});
  EXPECT_EQ(train(koch), kExitUsage);
  EXPECT_EQ(train({"--out-dir", out2.str()}), kExitUsage);  // no data folder
  std::vector<std::string> way = tiny(data.str(), out2.str());
  way.insert(way.end(), {"--one-shot-way", "3"});  // 2 validation classes cannot make 3-way tasks
  testing::internal::CaptureStderr();
  EXPECT_EQ(train(way), kExitFailed);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("--one-shot-way 3"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(out2 / "metrics.jsonl")) << "refused before training";
}

TEST(MetricEmbed, WritesNamedEmbeddingsNeighboursAndRefusesOtherCheckpoints) {
  TempDir data("folder2"), out("me");
  test::make_image_folder(data.str(), 6, 3, 16);
  std::vector<std::string> args = tiny(data.str(), out.str());
  args.insert(args.end(), {"--epochs", "1", "--val-classes", "0.34", "--test-classes", "0"});
  ASSERT_EQ(train(args), kExitOk);
  const std::string ckpt = out / "best.safetensors";
  // safetensors: the tensor and the names.
  ASSERT_EQ(embed({"--checkpoint", ckpt, "--images", data.str(), "--out", out / "e.safetensors", "--knn", "2",
                   "--neighbours", out / "nn.csv", "--cache-dir", "none"}),
            0);
  const nn::SafetensorsFile f = nn::read_safetensors(out / "e.safetensors");
  ASSERT_EQ(f.tensors.at("embeddings").shape(), (Shape{18, 8}));
  const Json files = Json::parse(f.metadata.at("files"));
  EXPECT_EQ(files[0], "class10/0.png");
  EXPECT_EQ(Json::parse(f.metadata.at("classes"))[17], "class15");
  const std::vector<std::string> csv = read_lines(out / "nn.csv");
  ASSERT_EQ(csv.size(), 1u + 18 * 2);
  EXPECT_EQ(csv[0], "query,query_class,rank,neighbour,neighbour_class,distance");
  EXPECT_EQ(csv[1].rfind("class10/0.png,class10,1,", 0), 0u) << csv[1];
  EXPECT_EQ(csv[1].find("class10/0.png,class10,1,class10/0.png"), std::string::npos) << "an image is not its own "
                                                                                        "neighbour";
  // .npy with its names beside it; a separate gallery; JSON neighbours.
  TempDir gallery("gallery");
  test::make_image_folder(gallery.str(), 2, 2, 16, 9);
  ASSERT_EQ(embed({"--checkpoint", ckpt, "--images", data.str(), "--out", out / "e.npy", "--knn", "3", "--gallery",
                   gallery.str(), "--neighbours", out / "nn.json", "--cache-dir", "none"}),
            0);
  const std::string npy = read_text(out / "e.npy");
  EXPECT_EQ(npy.substr(1, 5), "NUMPY");
  EXPECT_NE(npy.find("'shape': (18, 8)"), std::string::npos);
  EXPECT_EQ(npy.size(), 128u + 18 * 8 * 4);
  EXPECT_EQ(read_lines(out / "e.npy.files.txt").size(), 18u);
  const Json nn = Json::parse(read_text(out / "nn.json"));
  ASSERT_EQ(nn.size(), 18u);
  ASSERT_EQ(nn[0]["neighbours"].size(), 3u);
  EXPECT_EQ(nn[0]["neighbours"][0]["file"].get<std::string>().rfind("class1", 0), 0u);
  // Errors: a missing checkpoint, another study's checkpoint, a bad output name.
  EXPECT_EQ(embed({"--checkpoint", out / "nope.safetensors", "--images", data.str()}), 1);
  nn::write_safetensors(out / "other.safetensors", {{"w", Tensor::zeros({1}, DType::F32)}},
                        {{"study", "omniglot_triplet"}});
  testing::internal::CaptureStderr();
  EXPECT_EQ(embed({"--checkpoint", out / "other.safetensors", "--images", data.str()}), 1);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("not metric_train"), std::string::npos);
  EXPECT_EQ(embed({"--checkpoint", ckpt, "--images", data.str(), "--out", out / "e.txt", "--cache-dir", "none"}), 1);
  EXPECT_EQ(embed({"--images", data.str()}), 2);
}

// Our Recall@K and MAP@R against numpy on the same embeddings (skips without numpy).
TEST(MetricEmbed, MetricsMatchNumpy) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3-numpy not installed (tools/install-deps.sh --bench): the numpy reference is skipped";
  TempDir data("folder3"), out("mn");
  test::make_image_folder(data.str(), 6, 5, 16, 4);
  std::vector<std::string> args = tiny(data.str(), out.str());
  args.insert(args.end(), {"--epochs", "1", "--val-classes", "0.34", "--test-classes", "0"});
  ASSERT_EQ(train(args), kExitOk);
  testing::internal::CaptureStdout();
  ASSERT_EQ(embed({"--checkpoint", out / "best.safetensors", "--images", data.str(), "--out", out / "e.npy",
                   "--cache-dir", "none", "--recall-k", "1,3"}),
            0);
  const std::string ours = testing::internal::GetCapturedStdout();
  const std::string script = out / "ref.py";
  std::ofstream(script) << "import numpy as np, sys\n"
                           "a = np.load(sys.argv[1]).astype(np.float64)\n"
                           "lab = np.array([l.split('\\t')[1].strip() for l in open(sys.argv[1] + '.files.txt')])\n"
                           "d = np.sqrt(np.maximum(0, (a * a).sum(1)[:, None] + (a * a).sum(1)[None] - 2 * a @ a.T))\n"
                           "rec = {1: 0, 3: 0}; aps = []\n"
                           "for i in range(len(a)):\n"
                           "    o = [j for j in np.lexsort((np.arange(len(a)), d[i])) if j != i]\n"
                           "    same = lab[o] == lab[i]; R = int((lab == lab[i]).sum() - 1)\n"
                           "    for k in rec: rec[k] += bool(same[:k].any())\n"
                           "    rel = same[:R]; aps.append((np.cumsum(rel) / np.arange(1, R + 1) * rel).sum() / R)\n"
                           "print('Recall@1 %.2f %%' % (100 * rec[1] / len(a)))\n"
                           "print('Recall@3 %.2f %%' % (100 * rec[3] / len(a)))\n"
                           "print('MAP@R %.2f %%' % (100 * np.mean(aps)))\n";
  const std::string ref_out = out / "ref.txt";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " " + out / "e.npy" + " > " + ref_out).c_str()), 0);
  for (const std::string& line : read_lines(ref_out)) EXPECT_NE(ours.find(line), std::string::npos) << line << "\n" << ours;
}

}  // namespace
