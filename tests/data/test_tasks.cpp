// One-shot task generator: structure, reproducibility, within-alphabet, drawer
// separation, random candidate positions; evaluation with embeddings.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "data/omniglot.h"
#include "data/tasks.h"
#include "data_test_util.h"

using namespace mn;
using namespace mn::data;

namespace {
// Synthetic Omniglot-like dataset: A alphabets x K characters x D drawers, 4x4
// images whose first pixel encodes the class (so tests can check gathers).
ImageDataset synthetic(int A, int K, int D) {
  ImageDataset ds;
  const int N = A * K * D;
  ds.images = Tensor::zeros({N, 4, 4}, DType::U8);
  for (int a = 0; a < A; ++a) ds.alphabet_names.push_back("alpha" + std::to_string(a));
  int i = 0;
  for (int a = 0; a < A; ++a)
    for (int k = 0; k < K; ++k) {
      int c = static_cast<int>(ds.class_names.size());
      ds.class_names.push_back(ds.alphabet_names[a] + "/c" + std::to_string(k));
      ds.class_alphabet.push_back(a);
      for (int d = 1; d <= D; ++d, ++i) {
        ds.labels.push_back(c);
        ds.drawer.push_back(d);
        ds.images.data<uint8_t>()[i * 16] = static_cast<uint8_t>(c);
        ds.images.data<uint8_t>()[i * 16 + 1] = static_cast<uint8_t>(d);
      }
    }
  return ds;
}
}  // namespace

TEST(DataTasks, LakeKochStructure) {
  ImageDataset ds = synthetic(3, 25, 6);
  TaskOptions o;
  o.seed = 11;
  auto tasks = make_one_shot_tasks(ds, o);
  ASSERT_EQ(tasks.size(), 320u);
  std::map<int, int> truth_pos;
  std::set<int> alphabets;
  for (const auto& t : tasks) {
    ASSERT_EQ(t.candidates.size(), 20u);
    ASSERT_EQ(t.queries.size(), 20u);
    alphabets.insert(t.alphabet);
    std::set<int> cls;
    int d1 = ds.drawer[t.candidates[0]], d2 = ds.drawer[t.queries[0]];
    EXPECT_NE(d1, d2);
    for (auto c : t.candidates) {
      cls.insert(ds.labels[c]);
      EXPECT_EQ(ds.class_alphabet[ds.labels[c]], t.alphabet);
      EXPECT_EQ(ds.drawer[c], d1);
    }
    EXPECT_EQ(cls.size(), 20u);
    for (size_t q = 0; q < 20; ++q) {
      EXPECT_EQ(ds.labels[t.queries[q]], ds.labels[t.candidates[t.answer[q]]]);
      EXPECT_EQ(ds.drawer[t.queries[q]], d2);
      truth_pos[t.answer[q]]++;
    }
  }
  EXPECT_EQ(alphabets.size(), 3u);
  EXPECT_EQ(truth_pos.size(), 20u);  // the truth is not parked at one position
  // Same seed -> same tasks; another seed -> different tasks.
  auto again = make_one_shot_tasks(ds, o);
  for (size_t i = 0; i < tasks.size(); ++i) {
    EXPECT_EQ(again[i].candidates, tasks[i].candidates);
    EXPECT_EQ(again[i].queries, tasks[i].queries);
  }
  o.seed = 12;
  auto other = make_one_shot_tasks(ds, o);
  int same = 0;
  for (size_t i = 0; i < tasks.size(); ++i) same += other[i].candidates == tasks[i].candidates;
  EXPECT_LT(same, 5);
}

TEST(DataTasks, AnchorVariantAndEvaluation) {
  ImageDataset ds = synthetic(2, 21, 5);
  TaskOptions o;
  o.kind = TaskKind::AnchorCandidates;
  o.num_tasks = 100;
  o.seed = 3;
  auto tasks = make_one_shot_tasks(ds, o);
  std::set<int> pos;
  for (const auto& t : tasks) {
    ASSERT_EQ(t.queries.size(), 1u);
    ASSERT_EQ(t.candidates.size(), 20u);
    const int64_t anchor = t.queries[0], match = t.candidates[t.answer[0]];
    EXPECT_NE(anchor, match);
    EXPECT_EQ(ds.labels[anchor], ds.labels[match]);
    pos.insert(t.answer[0]);
    for (size_t c = 0; c < 20; ++c)
      if (static_cast<int>(c) != t.answer[0]) {
        EXPECT_NE(ds.labels[t.candidates[c]], ds.labels[anchor]);
      }
  }
  EXPECT_GT(pos.size(), 10u);
  // Embeddings = one-hot class: perfect; constant embeddings: 1 - 1/20 error.
  Tensor emb = Tensor::zeros({ds.size(), ds.num_classes()}, DType::F32);
  for (int64_t i = 0; i < ds.size(); ++i) emb.data<float>()[i * ds.num_classes() + ds.labels[i]] = 1;
  EXPECT_DOUBLE_EQ(evaluate_tasks_embeddings(tasks, emb).error_percent, 0.0);
  EXPECT_NEAR(evaluate_tasks_embeddings(tasks, Tensor::zeros({ds.size(), 3})).error_percent, 95.0, 1e-9);
  // Image-level: the class is in pixel 0, so |p0 - p0'| is a perfect cost.
  auto r = evaluate_tasks(ds, tasks, [](const Tensor& q, const Tensor& c) {
    Tensor m = Tensor::empty({q.size(0), c.size(0)}, DType::F64);
    for (int64_t i = 0; i < q.size(0); ++i)
      for (int64_t j = 0; j < c.size(0); ++j)
        m.data<double>()[i * c.size(0) + j] =
            std::abs(int(q.data<uint8_t>()[i * 16]) - int(c.data<uint8_t>()[j * 16]));
    return m;
  }, ScoreKind::Cost);
  EXPECT_DOUBLE_EQ(r.error_percent, 0.0);
  EXPECT_EQ(r.trials, 100);
}

TEST(DataTasks, TooFewCharactersThrows) {
  ImageDataset ds = synthetic(2, 5, 3);
  TaskOptions o;
  EXPECT_MN_ERROR(make_one_shot_tasks(ds, o), "no alphabet", "20 characters");
}

TEST(DataTasks, RealOmniglotValidationTasks) {
  MN_SKIP_IF_NO_DATA(root, "omniglot/images_evaluation");
  OmniglotLoadOptions lo;
  lo.cache_dir = std::string(MN_BINARY_DIR) + "/data_cache";
  ImageDataset ev = load_omniglot_set(root, lo);
  auto tasks = make_one_shot_tasks(ev, TaskOptions{});
  EXPECT_EQ(tasks.size(), 320u);
  for (const auto& t : tasks) {
    EXPECT_EQ(t.queries.size(), 20u);
    EXPECT_LT(t.alphabet, 10);
  }
}
