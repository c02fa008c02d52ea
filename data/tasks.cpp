// One-shot task generation (Lake/Koch within-alphabet; Omniglot-study anchor
// variant) and their evaluation.
#include "data/tasks.h"
#include "data/file_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

namespace mn::data {

Tensor gather_images(const ImageDataset& ds, const std::vector<int64_t>& idx) {
  const int64_t H = ds.height(), W = ds.width(), plane = H * W;
  Tensor out = Tensor::empty({static_cast<int64_t>(idx.size()), H, W}, DType::U8);
  Tensor src = ds.images.contiguous();
  for (size_t k = 0; k < idx.size(); ++k) {
    MN_DATA_CHECK(idx[k] >= 0 && idx[k] < ds.size(), "gather_images: index ", idx[k],
             " out of range [0, ", ds.size(), ")");
    std::memcpy(out.data<uint8_t>() + k * plane, src.data<uint8_t>() + idx[k] * plane,
                static_cast<size_t>(plane));
  }
  return out;
}

namespace {
template <typename V>
V pick(const std::vector<V>& v, Generator& g) {
  return v[static_cast<size_t>(g.next_int(0, static_cast<int64_t>(v.size())))];
}
}  // namespace

std::vector<OneShotTask> make_one_shot_tasks(const ImageDataset& ds, const TaskOptions& opt) {
  MN_DATA_CHECK(opt.n_way >= 2 && opt.num_tasks >= 0, "make_one_shot_tasks: n_way must be >= 2 (got ",
           opt.n_way, ") and num_tasks >= 0 (got ", opt.num_tasks, ")");
  const auto by_class = ds.indices_by_class();
  // Groups of classes to draw characters from: one per alphabet, or all classes.
  std::vector<std::vector<int32_t>> groups;
  std::vector<int32_t> group_alpha;
  if (opt.within_alphabet) {
    MN_DATA_CHECK(!ds.class_alphabet.empty(), "make_one_shot_tasks: within_alphabet needs alphabets");
    groups.resize(ds.alphabet_names.size());
    for (int32_t c = 0; c < ds.num_classes(); ++c)
      if (!by_class[c].empty()) groups[ds.class_alphabet[c]].push_back(c);
    for (size_t a = 0; a < groups.size(); ++a) group_alpha.push_back(static_cast<int32_t>(a));
  } else {
    groups.emplace_back();
    for (int32_t c = 0; c < ds.num_classes(); ++c)
      if (!by_class[c].empty()) groups[0].push_back(c);
    group_alpha.push_back(-1);
  }
  std::vector<size_t> eligible;
  for (size_t a = 0; a < groups.size(); ++a)
    if (static_cast<int>(groups[a].size()) >= opt.n_way) eligible.push_back(a);
  MN_DATA_CHECK(!eligible.empty(), "make_one_shot_tasks: no ",
           opt.within_alphabet ? "alphabet" : "dataset", " has ", opt.n_way, " characters");
  const bool lake = opt.kind == TaskKind::LakeKoch;
  MN_DATA_CHECK(!lake || ds.drawer.size() == ds.labels.size(),
           "make_one_shot_tasks: LakeKoch tasks need drawers");

  Generator g(opt.seed);
  std::vector<OneShotTask> tasks;
  tasks.reserve(opt.num_tasks);
  for (int t = 0; t < opt.num_tasks; ++t) {
    OneShotTask task;
    const size_t gi = pick(eligible, g);
    task.alphabet = group_alpha[gi];
    const auto& cls = groups[gi];
    std::vector<int64_t> sel = sample_without_replacement(static_cast<int64_t>(cls.size()), opt.n_way, g);
    std::vector<int32_t> chars;
    for (int64_t s : sel) chars.push_back(cls[s]);
    const int n = opt.n_way;
    if (lake) {
      // drawer -> image per chosen character; the drawers all of them share.
      std::vector<std::map<int32_t, int64_t>> dmap(n);
      for (int i = 0; i < n; ++i)
        for (int64_t im : by_class[chars[i]]) dmap[i].emplace(ds.drawer[im], im);
      std::vector<int32_t> common;
      for (auto& kv : dmap[0]) {
        bool all = true;
        for (int i = 1; i < n && all; ++i) all = dmap[i].count(kv.first) > 0;
        if (all) common.push_back(kv.first);
      }
      MN_DATA_CHECK(common.size() >= 2, "make_one_shot_tasks: the chosen characters share fewer than 2 drawers");
      std::vector<int64_t> two = sample_without_replacement(static_cast<int64_t>(common.size()), 2, g);
      const int32_t d1 = common[two[0]], d2 = common[two[1]];
      std::vector<int64_t> order = randperm(n, g);  // candidate slot k holds character order[k]
      std::vector<int32_t> slot(n);
      for (int k = 0; k < n; ++k) {
        task.candidates.push_back(dmap[order[k]].at(d1));
        slot[order[k]] = k;
      }
      for (int i = 0; i < n; ++i) {
        task.queries.push_back(dmap[i].at(d2));
        task.answer.push_back(slot[i]);
      }
    } else {
      const int target = static_cast<int>(g.next_int(0, n));
      int64_t anchor = -1;
      for (int i = 0; i < n; ++i) {
        const auto& imgs = by_class[chars[i]];
        if (i != target) {
          task.candidates.push_back(pick(imgs, g));
          continue;
        }
        MN_DATA_CHECK(imgs.size() >= 2, "make_one_shot_tasks: class '", ds.class_names[chars[i]],
                 "' has a single image: no anchor possible");
        std::vector<int64_t> two = sample_without_replacement(static_cast<int64_t>(imgs.size()), 2, g);
        task.candidates.push_back(imgs[two[0]]);
        anchor = imgs[two[1]];
        task.answer.push_back(i);
      }
      task.queries.push_back(anchor);
    }
    tasks.push_back(std::move(task));
  }
  return tasks;
}

OneShotResult evaluate_tasks(const ImageDataset& ds, const std::vector<OneShotTask>& tasks,
                             const BatchFn& fn, ScoreKind kind) {
  OneShotResult r;
  for (const auto& t : tasks) {
    const int64_t Q = static_cast<int64_t>(t.queries.size()), C = static_cast<int64_t>(t.candidates.size());
    Tensor s = fn(gather_images(ds, t.queries), gather_images(ds, t.candidates));
    MN_DATA_CHECK(s.defined() && s.dim() == 2 && s.size(0) == Q && s.size(1) == C,
             "evaluate_tasks: the score function must return (", Q, ", ", C, ")");
    accumulate_group(s.to_double_vector(), Q, C, t.answer, kind, r);
  }
  return r;
}

OneShotResult evaluate_tasks_embeddings(const std::vector<OneShotTask>& tasks, const Tensor& emb) {
  MN_DATA_CHECK(emb.dim() == 2, "evaluate_tasks_embeddings: expected (N, D) embeddings, got ", emb.desc());
  const int64_t N = emb.size(0), D = emb.size(1);
  const std::vector<double> e = emb.to_double_vector();
  OneShotResult r;
  for (const auto& t : tasks) {
    const int64_t Q = static_cast<int64_t>(t.queries.size()), C = static_cast<int64_t>(t.candidates.size());
    std::vector<double> m(static_cast<size_t>(Q * C));
    for (int64_t q = 0; q < Q; ++q)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t a = t.queries[q], b = t.candidates[c];
        MN_DATA_CHECK(a >= 0 && a < N && b >= 0 && b < N, "evaluate_tasks_embeddings: image index out of range");
        double s = 0;
        for (int64_t k = 0; k < D; ++k) {
          const double d = e[a * D + k] - e[b * D + k];
          s += d * d;
        }
        m[q * C + c] = std::sqrt(s);
      }
    accumulate_group(m, Q, C, t.answer, ScoreKind::Cost, r);
  }
  return r;
}

}  // namespace mn::data
