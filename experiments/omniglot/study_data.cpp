// The Omniglot study's data side (see study_data.h).
#include "experiments/omniglot/study_data.h"

#include <algorithm>
#include <cstdio>

#include "data/augment.h"
#include "data/dataset.h"
#include "data/image_io.h"
#include "data/transforms.h"
#include "experiments/common/harness.h"
#include "kernels/elementwise.h"

namespace mn::exp {

namespace {
// Koch's affine distortions for S x S images: his ranges times `range`, the
// translation (2 px at 105 x 105) scaled to the image size.
data::KochAugmentOptions koch_options(int64_t S, double range = 1.0) {
  data::KochAugmentOptions ao;
  ao.max_rotation_deg *= range;
  ao.max_shear *= range;
  ao.min_scale = 1.0 - range * (1.0 - ao.min_scale);
  ao.max_scale = 1.0 + range * (ao.max_scale - 1.0);
  ao.max_translation *= range * static_cast<double>(S) / 105.0;
  return ao;
}
}  // namespace

StudyData::StudyData(const Flags& f, Device device, bool evaluating)
    : f_(f), device_(device), image_size_(f.i64("image-size")) {
  root_ = f.str("data-dir").empty() ? data::find_dataset_dir("omniglot") : f.str("data-dir");
  cache_dir_ = f.str("cache-dir").empty() ? data::default_cache_dir() : f.str("cache-dir");
  lake_dir_ = !root_.empty() && is_directory(root_ + "/all_runs") ? root_ + "/all_runs" : "";
  // --evaluate scores Lake's runs and --test-dir only: the training and
  // validation splits (images_background/, all its images) are not loaded.
  if (evaluating) return;
  MN_CHECK(!root_.empty(), "--data-dir: Omniglot not found in $MN_DATA_DIR, $DATA_DIR, ./datasets or "
           "../shared/datasets; run data/fetch.sh or pass --data-dir");
  MN_CHECK(is_directory(root_ + "/images_background"), "--data-dir: '", root_, "' has no images_background/ folder");
  data::OmniglotSplitOptions so;
  so.root = root_;
  so.cache_dir = cache_dir_;
  so.train_max_drawer = static_cast<int>(f.i64("train-max-drawer"));
  splits_ = data::load_omniglot_splits(so);
  if (image_size_ != splits_.train.height()) {
    // Once per run, at load time, from the packed 105x105 cache (not cached on
    // disk: 24,820 images took 0.74 s on one thread on a busy 2-core machine,
    // under 1 % of the 6-minute CPU preset; resize_area now splits them over the threads).
    splits_.train = data::resized(splits_.train, image_size_, image_size_);
    splits_.val = data::resized(splits_.val, image_size_, image_size_);
    splits_.description += ", area-averaged to " + std::to_string(image_size_) + "x" + std::to_string(image_size_);
  }
  if (f.flag("rotations")) {
    splits_.train = data::with_rotated_classes(splits_.train);
    splits_.description += "; training characters x4 with their 90/180/270-degree rotations (" +
                           std::to_string(splits_.train.num_classes()) + " classes)";
  }
  std::printf("data: %s\n", splits_.description.c_str());
  train_classes_ = std::make_unique<data::ClassIndex>(splits_.train.labels);
  val_classes_ = std::make_unique<data::ClassIndex>(splits_.val.labels);
  have_splits_ = true;
}

void StudyData::need_splits(const char* what) const {
  MN_CHECK(have_splits_, "StudyData: ", what, " needs the training and validation splits, which an --evaluate run "
           "does not load");
}

void StudyData::start_loader(int64_t triplets_per_batch, uint64_t seed, uint64_t offset, int64_t first,
                             int64_t count) {
  data::TripletLoaderOptions lo;
  lo.batch_size = triplets_per_batch;
  lo.shard_first = first;
  lo.shard_count = count;
  lo.device = device_;
  lo.seed = seed;
  lo.offset = offset;
  lo.mode = data::FloatMode::Ink01;
  lo.scale = f_.flag("input-norm") ? 1.0 : 255.0;
  lo.augment = f_.flag("augment");
  lo.augment_options = koch_options(image_size_);
  const std::string s = f_.str("sampling");
  lo.sampling = s == "hard-positive" ? data::TripletSampling::SsimHardPositive
                : s == "semi-hard-negative" ? data::TripletSampling::SsimSemiHardNegative
                : s == "ssim-both" ? data::TripletSampling::SsimMined
                                   : data::TripletSampling::Random;
  need_splits("the training loader");
  loader_.reset();  // stop the old prefetch thread before a new one starts
  loader_ = std::make_unique<data::TripletLoader>(splits_.train, lo);
  loader_seed_ = seed;
  loader_offset_ = offset;
}

TripletBatch StudyData::triplet_batch() {
  MN_CHECK(loader_, "StudyData: start_loader was not called");
  data::TripletBatch b = loader_->next();
  loader_offset_ = b.offset_after;
  return {b.anchor, b.positive, b.negative};
}

PairBatch StudyData::pair_batch(int64_t B) {
  MN_CHECK(B % 2 == 0, "--batch: the siamese net needs an even number of pairs, got ", B);
  TripletBatch t = triplet_batch();
  const int64_t h = B / 2;
  MN_CHECK(t.anchors.size(0) == h, "pair_batch: ", B, " pairs need ", h, " triplets, the loader gave ",
           t.anchors.size(0));
  std::vector<float> target(B, 0.0f);
  std::fill(target.begin(), target.begin() + h, 1.0f);
  Tensor left = Tensor::empty({B, 1, t.anchors.size(2), t.anchors.size(3)}, DType::F32, device_);
  Tensor right = Tensor::empty_like(left);
  left.narrow(0, 0, h).copy_(t.anchors);
  left.narrow(0, h, h).copy_(t.anchors);
  right.narrow(0, 0, h).copy_(t.positives);
  right.narrow(0, h, h).copy_(t.negatives);
  return {left, right, Tensor::from_vector(target, {B}, device_)};
}

PKBatch StudyData::pk_batch(int64_t P, int64_t K, Generator& g, int64_t first, int64_t count) {
  need_splits("a P x K batch");
  if (!train_images_device_.defined()) train_images_device_ = splits_.train.images.to(device_);
  std::vector<int64_t> idx =
      f_.flag("pk-alphabet")
          ? data::sample_pk_batch_within_group(*train_classes_, splits_.train.class_alphabet, static_cast<int>(P),
                                               static_cast<int>(K), g)
          : data::sample_pk_batch(*train_classes_, static_cast<int>(P), static_cast<int>(K), g);
  std::vector<int64_t> labels;
  for (int64_t i : idx) labels.push_back(train_classes_->label_of(i));
  const int64_t n = static_cast<int64_t>(idx.size());
  if (count < 0) count = n - first;
  MN_CHECK(first >= 0 && count >= 1 && first + count <= n, "pk_batch: rows [", first, ", ", first + count,
           ") of a batch of ", n);
  const std::vector<int64_t> mine(idx.begin() + first, idx.begin() + first + count);
  Tensor x = data::gather_images_float(train_images_device_, Tensor::from_vector(mine, {count}, device_),
                                       data::FloatMode::Ink01);
  if (f_.flag("augment")) {
    // Koch's affine distortions (translation scaled to the image size), ink-high
    // inputs so the outside is 0 (paper). Drawn from `g` after the batch's indices,
    // for every row of the batch (the stream is every rank's), applied to ours.
    const int64_t S = x.size(2);
    auto params = data::draw_koch_affines(n, S, S, koch_options(image_size_), g);
    params = std::vector<data::Affine2D>(params.begin() + first, params.begin() + first + count);
    x = data::affine_warp(x.reshape({count, S, S}), params, 0.0).reshape({count, 1, S, S});
  }
  if (!f_.flag("input-norm")) x = kernels::mul_scalar(x, 255.0);
  return {x, Tensor::from_vector(labels, {n}, device_)};
}

Tensor StudyData::to_input(const Tensor& images_u8) const {
  MN_CHECK(images_u8.dtype() == DType::U8 && images_u8.dim() == 3, "to_input: expected (n, H, W) uint8 images, got ",
           images_u8.desc());
  // Lake's runs and --test-dir come at 105x105: area-averaged like the training images.
  const Tensor u8 = images_u8.size(1) == image_size_ && images_u8.size(2) == image_size_
                        ? images_u8
                        : data::resize_area(images_u8.to(Device::cpu()), image_size_, image_size_);
  const int64_t n = u8.size(0);
  Tensor x = data::gather_images_float(u8.to(device_), Tensor::arange(n, DType::I64, device_),
                                       data::FloatMode::Ink01);
  return f_.flag("input-norm") ? x : kernels::mul_scalar(x, 255.0);
}

Tensor StudyData::tta_view(const Tensor& x, int64_t view, int side) const {
  MN_CHECK(x.dim() == 4 && x.size(1) == 1 && view >= 1 && (side == 0 || side == 1),
           "tta_view: expected (n, 1, S, S) inputs, a view >= 1 and side 0 or 1, got ", x.desc(), ", view ", view,
           ", side ", side);
  const int64_t n = x.size(0), S = x.size(2);
  Generator g(0x7E57A000ULL + 2 * static_cast<uint64_t>(view) + static_cast<uint64_t>(side));
  const auto params = data::draw_koch_affines(n, S, x.size(3), koch_options(S, f_.f64("tta-scale")), g);
  // Ink-high inputs: the outside is background, 0 (as in training).
  return data::affine_warp(x.reshape({n, S, x.size(3)}), params, 0.0).reshape({n, 1, S, x.size(3)});
}

Tensor StudyData::val_input(const std::vector<int64_t>& idx) const {
  need_splits("validation");
  return to_input(data::gather_images(splits_.val, idx));
}

IndexTriplets StudyData::random_triplets(const data::ClassIndex& ci, int64_t n, uint64_t seed) const {
  need_splits("validation");
  Generator g(seed);
  IndexTriplets t;
  data::split_triplets(data::sample_random_triplets(ci, n, g), t.anchors, t.positives, t.negatives);
  return t;
}

const IndexTriplets& StudyData::val_triplets() {
  if (!have_val_triplets_) {
    // Fixed seed: the same validation triplets every epoch and every run; always random
    // ("when validating or testing, the branches are always sampled randomly").
    val_triplets_ = random_triplets(*val_classes_, f_.i64("val-triplets"), 987654321);
    have_val_triplets_ = true;
  }
  return val_triplets_;
}

const IndexPairs& StudyData::val_pairs() {
  if (!have_val_pairs_) {
    IndexTriplets t = random_triplets(*val_classes_, f_.i64("val-triplets"), 987654321);
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
    need_splits("validation");
    data::TaskOptions to;
    check_way(splits_.val, "--val-way", f_.i64("val-way"), "the validation split");
    to.n_way = static_cast<int>(f_.i64("val-way"));
    to.num_tasks = static_cast<int>(f_.i64("val-tasks"));
    to.seed = 20180101;  // fixed: model selection compares epochs on the same tasks
    to.kind = data::TaskKind::AnchorCandidates;
    tasks_ = data::make_one_shot_tasks(splits_.val, to);
    have_tasks_ = true;
  }
  return tasks_;
}

std::vector<std::string> check_way(const data::ImageDataset& ds, const char* flag, int64_t n, const std::string& what) {
  // Tasks draw their N characters from one alphabet (data/tasks.h).
  std::vector<int64_t> per_alphabet(ds.alphabet_names.size(), 0);
  for (int32_t c = 0; c < ds.num_classes(); ++c)
    if (c < static_cast<int32_t>(ds.class_alphabet.size()) && ds.class_alphabet[c] >= 0)
      ++per_alphabet[static_cast<size_t>(ds.class_alphabet[c])];
  const int64_t most = per_alphabet.empty() ? ds.num_classes()
                                            : *std::max_element(per_alphabet.begin(), per_alphabet.end());
  MN_CHECK(n <= most, flag, " ", n, ": ", what, " has at most ", most, " characters in one alphabet, and an N-way "
           "task draws its N characters from one alphabet; use ", flag, " ", most, " or less");
  // The alphabets too small for N-way tasks are left out of them: say so.
  std::vector<std::string> left_out;
  std::string list;
  for (size_t a = 0; a < per_alphabet.size(); ++a)
    if (per_alphabet[a] < n) {
      left_out.push_back(ds.alphabet_names[a] + " (" + std::to_string(per_alphabet[a]) + " characters)");
      list += (list.empty() ? "" : ", ") + left_out.back();
    }
  if (!left_out.empty())
    std::fprintf(stderr, "warning: %s %lld: %zu of the %zu alphabets of %s have fewer than %lld characters and are "
                 "left out of its tasks (an N-way task draws its N characters from one alphabet): %s\n", flag,
                 static_cast<long long>(n), left_out.size(), per_alphabet.size(), what.c_str(),
                 static_cast<long long>(n), list.c_str());
  return left_out;
}

const std::vector<data::LakeRun>& StudyData::lake_runs() {
  if (!have_lake_) {
    MN_CHECK(!lake_dir_.empty(), "Lake's runs: no all_runs/ folder under '", root_, "'");
    lake_ = data::load_lake_runs(lake_dir_);
    // Lake's runs are Omniglot drawings (105x105), area-averaged to --image-size
    // like the training images; other sizes are not Lake's images (resize_area
    // would refuse a smaller one without naming it, or silently rescale it).
    const int64_t side = data::OmniglotLoadOptions{}.expected_size;
    for (const auto& run : lake_) {
      const Tensor& q = run.queries;  // load_lake_runs: every image of a run has one size
      MN_CHECK(q.size(1) == side && q.size(2) == side, "Lake's runs: '", lake_dir_, "/", run.query_files.at(0),
               "' (and the rest of its run folder) is ", q.size(1), "x", q.size(2), ", expected ", side, "x", side,
               " (Omniglot's drawings): '", lake_dir_, "' does not hold Lake's all_runs/ images; restore them "
               "(data/fetch.sh get omniglot) or point --data-dir elsewhere");
    }
    have_lake_ = true;
  }
  return lake_;
}

}  // namespace mn::exp
