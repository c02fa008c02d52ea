// Loading and per-seed splitting of Iris, ORL and MNIST for the LMNN study; see datasets.h.
#include "experiments/lmnn_mining/datasets.h"

#include <algorithm>
#include <cmath>

#include "data/csv.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/orl.h"
#include "runtime/error.h"
#include "runtime/rng.h"

namespace mn::lmnn {

namespace {

std::string folder_name(const std::string& dataset) {
  if (dataset == "iris") return "iris";
  if (dataset == "orl") return "orl_faces";
  if (dataset == "mnist") return "mnist";
  MN_THROW("lmnn data: unknown data set '", dataset, "' (expected iris, orl or mnist)");
}

// Distinct streams per (data set, seed) so the splits of different data sets
// do not share random numbers.
Generator split_generator(uint64_t seed, uint64_t salt) { return Generator(seed * 1000003ULL + salt); }

Mat images_to_mat(const Tensor& u8) {
  const int64_t n = u8.size(0), D = u8.numel() / std::max<int64_t>(n, 1);
  std::vector<uint8_t> px = u8.contiguous().to_vector<uint8_t>();
  Mat x(n, D);
  for (size_t i = 0; i < px.size(); ++i) x.a[i] = px[i] / 255.0;
  return x;
}

template <typename V>
V take(const V& v, const std::vector<int64_t>& idx) {
  V out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(v[static_cast<size_t>(i)]);
  return out;
}

// Indices of every class, in data order.
std::vector<std::vector<int64_t>> group_by_class(const std::vector<int32_t>& labels) {
  int32_t C = 0;
  for (int32_t y : labels) C = std::max(C, y + 1);
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(C));
  for (size_t i = 0; i < labels.size(); ++i) by_class[labels[i]].push_back(static_cast<int64_t>(i));
  return by_class;
}

}  // namespace

SplitIdx iris_split(int64_t n, uint64_t seed) {
  Generator g = split_generator(seed, 1);
  std::vector<int64_t> perm = randperm(n, g);
  // 70 % / 15 % of 150 -> 105 / 22.5: the study's accuracies are multiples of
  // 1/22, so the test split gets 22 and validation the remaining 23.
  const int64_t ntrain = static_cast<int64_t>(std::floor(0.70 * n + 1e-9));
  const int64_t ntest = static_cast<int64_t>(std::floor(0.15 * n + 1e-9));
  SplitIdx s;
  s.train.assign(perm.begin(), perm.begin() + ntrain);
  s.val.assign(perm.begin() + ntrain, perm.end() - ntest);
  s.test.assign(perm.end() - ntest, perm.end());
  return s;
}

SplitIdx orl_split(const std::vector<int32_t>& labels, uint64_t seed, bool fixed) {
  Generator g = split_generator(seed, 2);
  const std::vector<std::vector<int64_t>> by_class = group_by_class(labels);
  SplitIdx s;
  for (const auto& idx : by_class) {
    MN_CHECK(idx.size() == 10, "lmnn data: ORL: a subject has ", idx.size(),
             " images; the protocol needs 10 (6 train, 2 validation, 2 test)");
    s.train.insert(s.train.end(), idx.begin(), idx.begin() + 6);
    std::vector<int64_t> rest(idx.begin() + 6, idx.end());
    std::vector<int64_t> perm = randperm(4, g);  // drawn either way: one stream per seed
    if (fixed) perm = {0, 1, 2, 3};              // images 7-8 validation, 9-10 test
    s.val.push_back(rest[perm[0]]);
    s.val.push_back(rest[perm[1]]);
    s.test.push_back(rest[perm[2]]);
    s.test.push_back(rest[perm[3]]);
  }
  return s;
}

SplitIdx mnist_split(const std::vector<int32_t>& labels, int64_t ntr, int64_t nva, int64_t nte,
                     uint64_t seed) {
  Generator g = split_generator(seed, 3);
  const std::vector<std::vector<int64_t>> by_class = group_by_class(labels);
  SplitIdx s;
  for (const auto& idx : by_class) {
    const int64_t need = ntr + nva + nte;
    MN_CHECK(static_cast<int64_t>(idx.size()) >= need, "lmnn data: MNIST: a digit has ", idx.size(),
             " images, the subset needs ", need);
    std::vector<int64_t> pick = sample_without_replacement(static_cast<int64_t>(idx.size()), need, g);
    for (int64_t r = 0; r < need; ++r) {
      auto& dst = r < ntr ? s.train : (r < ntr + nva ? s.val : s.test);
      dst.push_back(idx[pick[r]]);
    }
  }
  return s;
}

SplitIdx mnist_first_split() {
  SplitIdx s;
  for (int64_t i = 0; i < 400; ++i) s.train.push_back(i);
  for (int64_t i = 500; i < 600; ++i) s.val.push_back(i);
  for (int64_t i = 0; i < kMnistFirstTest; ++i) s.test.push_back(kMnistFirstTrain + i);
  return s;
}

std::string StudyData::dir_of(const std::string& dataset) const {
  const std::string name = folder_name(dataset);
  if (!data_dir_.empty()) return data_dir_ + "/" + name;
  return data::find_dataset_dir(name);
}

const StudyData::Raw& StudyData::raw(const std::string& dataset) {
  std::unique_ptr<Raw>& slot = dataset == "iris" ? iris_ : dataset == "orl" ? orl_ : mnist_;
  if (slot) return *slot;
  const std::string dir = dir_of(dataset);
  MN_CHECK(!dir.empty(), "lmnn data: data set '", folder_name(dataset),
           "' not found under $MN_DATA_DIR, ./datasets or ../shared/datasets (use --data-dir)");
  auto r = std::make_unique<Raw>();
  if (dataset == "iris") {
    data::TabularDataset t = data::load_iris(dir + "/iris.csv");
    std::vector<float> f = t.features.contiguous().to_vector<float>();
    r->x = Mat(t.features.size(0), t.features.size(1));
    for (size_t i = 0; i < f.size(); ++i) r->x.a[i] = f[i];
    r->y = t.labels;
    r->num_classes = static_cast<int32_t>(t.class_names.size());
  } else if (dataset == "mnist" && mnist_first_) {
    // The authors' subset: only the images it uses are kept.
    const data::MnistFamily fam = data::load_mnist_family(dir);
    MN_CHECK(fam.train.size() >= kMnistFirstTrain && fam.test.size() >= kMnistFirstTest, "lmnn data: MNIST in '",
             dir, "' has ", fam.train.size(), " training and ", fam.test.size(), " test images; --mnist-subset "
             "first needs ", kMnistFirstTrain, " and ", kMnistFirstTest);
    const Mat tr = images_to_mat(fam.train.images.narrow(0, 0, kMnistFirstTrain));
    const Mat te = images_to_mat(fam.test.images.narrow(0, 0, kMnistFirstTest));
    r->x = Mat(tr.rows + te.rows, tr.cols);
    std::copy(tr.a.begin(), tr.a.end(), r->x.a.begin());
    std::copy(te.a.begin(), te.a.end(), r->x.a.begin() + static_cast<std::ptrdiff_t>(tr.a.size()));
    r->y.assign(fam.train.labels.begin(), fam.train.labels.begin() + kMnistFirstTrain);
    r->y.insert(r->y.end(), fam.test.labels.begin(), fam.test.labels.begin() + kMnistFirstTest);
    r->num_classes = static_cast<int32_t>(fam.train.num_classes());
    r->h = static_cast<int>(fam.train.height());
    r->w = static_cast<int>(fam.train.width());
  } else {
    data::ImageDataset ds =
        dataset == "orl" ? data::load_orl_faces(dir) : data::load_mnist_family(dir).train;
    r->x = images_to_mat(ds.images);
    r->y = ds.labels;
    r->num_classes = static_cast<int32_t>(ds.num_classes());
    r->h = static_cast<int>(ds.height());
    r->w = static_cast<int>(ds.width());
  }
  slot = std::move(r);
  return *slot;
}

StudySplit StudyData::split(const std::string& dataset, uint64_t seed) {
  const Raw& r = raw(dataset);
  SplitIdx idx;
  int64_t pca_dims = 0;
  if (dataset == "iris") {
    idx = iris_split(r.x.rows, seed);
  } else if (dataset == "orl") {
    idx = orl_split(r.y, seed, orl_fixed_split_);
    pca_dims = 15;
  } else {
    idx = mnist_first_ ? mnist_first_split() : mnist_split(r.y, 40, 10, 10, seed);
    pca_dims = 30;
  }
  StudySplit s;
  s.dataset = dataset;
  s.num_classes = r.num_classes;
  s.ytrain = take(r.y, idx.train);
  s.yval = take(r.y, idx.val);
  s.ytest = take(r.y, idx.test);
  Mat tr = take_rows(r.x, idx.train), va = take_rows(r.x, idx.val), te = take_rows(r.x, idx.test);
  if (pca_dims > 0) {
    Pca p = fit_pca(tr, pca_dims);  // fitted on the training images only
    s.train = pca_transform(p, tr);
    s.val = pca_transform(p, va);
    s.test = pca_transform(p, te);
    if (dataset == "orl") {
      s.eigenfaces = p.components;
      s.image_h = r.h;
      s.image_w = r.w;
    }
  } else {
    s.train = std::move(tr);
    s.val = std::move(va);
    s.test = std::move(te);
  }
  return s;
}

}  // namespace mn::lmnn
