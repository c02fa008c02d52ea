// The Omniglot study's data side (see study_data.h).
#include "experiments/common/study_data.h"

#include <sys/stat.h>

#include <cstdio>

#include "data/dataset.h"
#include "data/image_io.h"

namespace mn::exp {

namespace {
bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
}  // namespace

StudyData::StudyData(const Flags& f, Device device) : f_(f), device_(device) {
  root_ = f.str("data-dir").empty() ? data::find_dataset_dir("omniglot") : f.str("data-dir");
  MN_CHECK(!root_.empty(), "--data-dir: Omniglot not found in $MN_DATA_DIR, $DATA_DIR, ./datasets or "
           "../shared/datasets; run data/fetch.sh or pass --data-dir");
  MN_CHECK(is_dir(root_ + "/images_background"), "--data-dir: '", root_, "' has no images_background/ folder");
  cache_dir_ = f.str("cache-dir").empty() ? data::default_cache_dir() : f.str("cache-dir");
  lake_dir_ = is_dir(root_ + "/all_runs") ? root_ + "/all_runs" : "";
  data::OmniglotSplitOptions so;
  so.root = root_;
  so.cache_dir = cache_dir_;
  so.train_max_drawer = static_cast<int>(f.i64("train-max-drawer"));
  splits_ = data::load_omniglot_splits(so);
  std::printf("data: %s\n", splits_.description.c_str());
  train_by_class_ = splits_.train.indices_by_class();
  val_by_class_ = splits_.val.indices_by_class();
}

Tensor StudyData::to_input(const Tensor& u8) const {
  MN_CHECK(u8.dtype() == DType::U8 && u8.dim() == 3, "to_input: expected (n, H, W) uint8 images, got ", u8.desc());
  Tensor x = data::to_float(u8, data::FloatMode::Ink01, DType::F32);
  if (!f_.flag("input-norm")) {
    std::vector<float> v = x.to_vector<float>();
    for (float& p : v) p *= 255.0f;
    x = Tensor::from_vector(v, x.shape());
  }
  return x.reshape({u8.size(0), 1, u8.size(1), u8.size(2)}).to(device_);
}

Tensor StudyData::val_input(const std::vector<int64_t>& idx) const {
  return to_input(data::gather_images(splits_.val, idx));
}

Tensor StudyData::train_input(const std::vector<int64_t>& idx, Generator& g) {
  (void)g;
  return to_input(data::gather_images(splits_.train, idx));
}

IndexTriplets StudyData::sample_triplets(const data::ImageDataset& ds,
                                         const std::vector<std::vector<int64_t>>& by_class, int64_t n,
                                         Generator& g, bool mined) {
  (void)mined;
  IndexTriplets t;
  int64_t C = static_cast<int64_t>(by_class.size());
  MN_CHECK(C >= 2, "sampling: need at least 2 classes, have ", C);
  (void)ds;
  for (int64_t i = 0; i < n; ++i) {
    // Anchor class uniform; positive from the same class excluding the anchor
    // image; negative from a uniformly chosen other class (the study's protocol).
    int64_t ca;
    do ca = g.next_int(0, C);
    while (by_class[ca].size() < 2);
    const auto& A = by_class[ca];
    int64_t ai = g.next_int(0, static_cast<int64_t>(A.size()));
    int64_t pi = g.next_int(0, static_cast<int64_t>(A.size()) - 1);
    if (pi >= ai) ++pi;
    int64_t cn = g.next_int(0, C - 1);
    if (cn >= ca) ++cn;
    const auto& Nn = by_class[cn];
    t.anchors.push_back(A[ai]);
    t.positives.push_back(A[pi]);
    t.negatives.push_back(Nn[g.next_int(0, static_cast<int64_t>(Nn.size()))]);
  }
  return t;
}

TripletBatch StudyData::triplet_batch(int64_t B, Generator& g) {
  IndexTriplets t = sample_triplets(splits_.train, train_by_class_, B, g, f_.str("sampling") != "random");
  return {train_input(t.anchors, g), train_input(t.positives, g), train_input(t.negatives, g)};
}

PairBatch StudyData::pair_batch(int64_t B, Generator& g) {
  // Half genuine pairs (Koch oversamples same-class pairs to balance them).
  IndexTriplets t = sample_triplets(splits_.train, train_by_class_, B, g, f_.str("sampling") != "random");
  std::vector<int64_t> right(B);
  std::vector<float> target(B);
  for (int64_t i = 0; i < B; ++i) {
    bool genuine = i % 2 == 0;
    right[i] = genuine ? t.positives[i] : t.negatives[i];
    target[i] = genuine ? 1.0f : 0.0f;
  }
  return {train_input(t.anchors, g), train_input(right, g), Tensor::from_vector(target, {B}).to(device_)};
}

const IndexTriplets& StudyData::val_triplets() {
  if (!have_val_triplets_) {
    Generator g(987654321);  // fixed: the same validation triplets every epoch and run
    val_triplets_ = sample_triplets(splits_.val, val_by_class_, f_.i64("val-triplets"), g, false);
    have_val_triplets_ = true;
  }
  return val_triplets_;
}

const IndexPairs& StudyData::val_pairs() {
  if (!have_val_pairs_) {
    Generator g(987654321);
    IndexTriplets t = sample_triplets(splits_.val, val_by_class_, f_.i64("val-triplets"), g, false);
    for (size_t i = 0; i < t.anchors.size(); ++i) {
      bool genuine = i % 2 == 0;
      val_pairs_.left.push_back(t.anchors[i]);
      val_pairs_.right.push_back(genuine ? t.positives[i] : t.negatives[i]);
      val_pairs_.genuine.push_back(genuine ? 1 : 0);
    }
    have_val_pairs_ = true;
  }
  return val_pairs_;
}

const std::vector<data::OneShotTask>& StudyData::val_tasks() {
  if (!have_tasks_) {
    data::TaskOptions to;
    to.n_way = static_cast<int>(f_.i64("val-way"));
    to.num_tasks = static_cast<int>(f_.i64("val-tasks"));
    to.seed = 20180101;  // fixed: model selection compares epochs on the same tasks
    to.kind = data::TaskKind::AnchorCandidates;
    tasks_ = data::make_one_shot_tasks(splits_.val, to);
    have_tasks_ = true;
  }
  return tasks_;
}

const std::vector<data::LakeRun>& StudyData::lake_runs() {
  if (!have_lake_) {
    MN_CHECK(!lake_dir_.empty(), "Lake's runs: no all_runs/ folder under '", root_, "'");
    lake_ = data::load_lake_runs(lake_dir_);
    have_lake_ = true;
  }
  return lake_;
}

}  // namespace mn::exp
