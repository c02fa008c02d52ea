// The sampling study's data and tuples (see data.h).
#include "experiments/sampling/data.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "data/dataset.h"
#include "data/idx.h"
#include "runtime/error.h"

namespace mn::exp::sampling {
namespace fs = std::filesystem;

std::vector<std::string> class_names_of(const std::string& dataset) {
  if (dataset == "fashion-mnist")
    return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  if (dataset == "kmnist") return {"o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"};
  return {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
}

std::string dataset_dir(const std::string& dataset, const std::string& data_dir) {
  if (!data_dir.empty()) {
    if (fs::is_directory(fs::path(data_dir) / dataset)) return (fs::path(data_dir) / dataset).string();
    MN_CHECK(fs::is_directory(data_dir), "--data-dir '", data_dir, "' is not a folder");
    return data_dir;
  }
  const std::string d = data::find_dataset_dir(dataset);
  MN_CHECK(!d.empty(), "no ", dataset, " folder found in $MN_DATA_DIR, ./datasets or ../shared/datasets (subfolder ",
           dataset, "); pass --data-dir, or fetch it with data/fetch.sh");
  return d;
}

namespace {
SplitImages normalise(const data::ImageDataset& ds, const std::vector<int64_t>& idx) {
  SplitImages s;
  const int64_t px = ds.height() * ds.width();
  const uint8_t* src = ds.images.data<uint8_t>();
  s.x.resize(idx.size() * static_cast<size_t>(px));
  s.y.reserve(idx.size());
  // x / 255 then (x - mean) / std, as ToTensor + Normalize.
  float lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<float>((v / 255.0 - kMean) / kStd);
  for (size_t i = 0; i < idx.size(); ++i) {
    const uint8_t* row = src + idx[i] * px;
    float* dst = s.x.data() + i * px;
    for (int64_t k = 0; k < px; ++k) dst[k] = lut[row[k]];
    s.y.push_back(ds.labels[idx[i]]);
  }
  return s;
}
}  // namespace

StudyImages load_study_images(const std::string& dataset, const std::string& data_dir, int32_t unseen,
                              int64_t max_train) {
  StudyImages out;
  out.dataset = dataset;
  out.dir = dataset_dir(dataset, data_dir);
  out.unseen = unseen;
  const data::MnistFamily fam = data::load_mnist_family(out.dir);
  MN_CHECK(fam.train.height() == 28 && fam.train.width() == 28 && fam.test.height() == 28,
           "sampling: '", out.dir, "' holds ", fam.train.height(), "x", fam.train.width(),
           " images; the study's net takes 28x28 (MNIST, KMNIST, Fashion-MNIST)");
  for (const auto* ds : {&fam.train, &fam.test})
    for (int32_t y : ds->labels)
      MN_CHECK(y >= 0 && y < 10, "sampling: '", out.dir, "' has label ", y, "; the study needs labels 0..9");
  out.note = fam.train.note;
  out.train_total = fam.train.size();
  data::HeldOutSplit split = data::held_out_class_split(fam.train, fam.test, {unseen});
  if (max_train > 0 && static_cast<int64_t>(split.train.size()) > max_train) split.train.resize(max_train);
  MN_CHECK(!split.train.empty(), "sampling: no training image left in '", out.dir, "' after removing class ", unseen);
  out.train = normalise(fam.train, split.train);
  out.test10 = normalise(fam.test, split.test10);
  // test9 as positions in test10 (test10 is the whole test set in order).
  out.test9 = split.test9;
  out.class_names = class_names_of(dataset);
  return out;
}

Tensor gather_images(const SplitImages& s, const std::vector<int64_t>& idx, int64_t side, Device device) {
  const int64_t px = side * side, n = static_cast<int64_t>(idx.size());
  Tensor t = Tensor::empty({n, 1, side, side}, DType::F32, Device::cpu());
  float* dst = t.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    MN_CHECK(idx[i] >= 0 && idx[i] < s.size(), "sampling: image index ", idx[i], " out of range [0, ", s.size(), ")");
    std::copy_n(s.x.data() + idx[i] * px, px, dst + i * px);
  }
  return device.is_cuda() ? t.to(device) : t;
}

namespace {
std::map<int32_t, std::vector<int64_t>> by_class(const std::vector<int32_t>& labels, const std::vector<int64_t>& subset) {
  std::map<int32_t, std::vector<int64_t>> m;
  for (int64_t i : subset) m[labels[i]].push_back(i);
  return m;
}
std::vector<int64_t> all_indices(size_t n) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(i);
  return v;
}
void shuffle(std::vector<int64_t>& v, Generator& g) {
  for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i) std::swap(v[i], v[g.next_int(0, i + 1)]);
}
// A random member of `cls` (any), and of a random other class than `not_cls`.
int64_t pick(const std::vector<int64_t>& cls, Generator& g) { return cls[g.next_int(0, static_cast<int64_t>(cls.size()))]; }
int64_t pick_other(const std::map<int32_t, std::vector<int64_t>>& m, const std::vector<int32_t>& classes,
                   int32_t not_cls, Generator& g) {
  MN_CHECK(classes.size() >= 2, "sampling: negatives need at least two classes");
  int32_t c;
  do c = classes[g.next_int(0, static_cast<int64_t>(classes.size()))]; while (c == not_cls);
  return pick(m.at(c), g);
}
std::vector<int32_t> keys(const std::map<int32_t, std::vector<int64_t>>& m) {
  std::vector<int32_t> k;
  for (const auto& [c, v] : m) k.push_back(c);
  return k;
}
}  // namespace

std::vector<std::vector<int64_t>> balanced_batches(const std::vector<int32_t>& labels,
                                                   const std::vector<int64_t>& subset, int P, int K,
                                                   int64_t batches, Generator& g) {
  auto m = by_class(labels, subset);
  std::vector<int32_t> classes = keys(m);
  MN_CHECK(static_cast<int64_t>(classes.size()) >= P, "sampling: a balanced batch of ", P, " classes, but the set has ",
           classes.size());
  for (auto& [c, v] : m) {
    MN_CHECK(static_cast<int64_t>(v.size()) >= K, "sampling: class ", c, " has ", v.size(), " images, fewer than K = ",
             K, " per balanced batch");
    shuffle(v, g);
  }
  std::map<int32_t, size_t> used;
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(batches));
  for (auto& b : out) {
    std::vector<int32_t> pool = classes;
    b.reserve(static_cast<size_t>(P) * K);
    for (int c = 0; c < P; ++c) {  // P classes without replacement
      const int64_t j = g.next_int(c, static_cast<int64_t>(pool.size()));
      std::swap(pool[c], pool[j]);
      auto& v = m[pool[c]];
      size_t& u = used[pool[c]];
      b.insert(b.end(), v.begin() + u, v.begin() + u + K);
      u += K;
      if (u + K > v.size()) {  // as the study's sampler: reshuffle when fewer than K remain
        shuffle(v, g);
        u = 0;
      }
    }
  }
  return out;
}

OfflinePlan offline_pairs(const std::vector<int32_t>& labels, Generator& g) {
  auto m = by_class(labels, all_indices(labels.size()));
  const auto classes = keys(m);
  OfflinePlan p;
  p.order = all_indices(labels.size());
  shuffle(p.order, g);
  for (int64_t a : p.order) {
    const bool same = g.next_uniform() < 0.5;
    int64_t b = a;
    if (same) {
      const auto& cls = m[labels[a]];
      MN_CHECK(cls.size() >= 2, "sampling: class ", labels[a], " has one image; a positive pair needs two");
      while (b == a) b = pick(cls, g);
    } else {
      b = pick_other(m, classes, labels[a], g);
    }
    p.partner.push_back(b);
    p.same.push_back(same ? 1 : 0);
  }
  return p;
}

OfflinePlan offline_triplets(const std::vector<int32_t>& labels, Generator& g) {
  auto m = by_class(labels, all_indices(labels.size()));
  const auto classes = keys(m);
  OfflinePlan p;
  p.order = all_indices(labels.size());
  shuffle(p.order, g);
  for (int64_t a : p.order) {
    const auto& cls = m[labels[a]];
    MN_CHECK(cls.size() >= 2, "sampling: class ", labels[a], " has one image; a triplet needs two");
    int64_t q = a;
    while (q == a) q = pick(cls, g);
    p.partner.push_back(q);
    p.negative.push_back(pick_other(m, classes, labels[a], g));
  }
  return p;
}

FixedPairs fixed_test_pairs(const std::vector<int32_t>& labels, const std::vector<int64_t>& subset, uint64_t seed) {
  Generator g(seed);
  auto m = by_class(labels, subset);
  const auto classes = keys(m);
  FixedPairs pos, neg;
  for (size_t i = 0; i < subset.size(); ++i) {
    const int64_t a = subset[i];
    FixedPairs& f = i % 2 == 0 ? pos : neg;
    f.a.push_back(a);
    f.b.push_back(i % 2 == 0 ? pick(m[labels[a]], g) : pick_other(m, classes, labels[a], g));
    f.same.push_back(i % 2 == 0 ? 1 : 0);
  }
  pos.a.insert(pos.a.end(), neg.a.begin(), neg.a.end());
  pos.b.insert(pos.b.end(), neg.b.begin(), neg.b.end());
  pos.same.insert(pos.same.end(), neg.same.begin(), neg.same.end());
  return pos;
}

FixedTriplets fixed_test_triplets(const std::vector<int32_t>& labels, const std::vector<int64_t>& subset,
                                  uint64_t seed, bool distinct_positive) {
  Generator g(seed);
  auto m = by_class(labels, subset);
  const auto classes = keys(m);
  FixedTriplets t;
  for (int64_t a : subset) {
    const auto& cls = m[labels[a]];
    int64_t p = pick(cls, g);
    if (distinct_positive) {
      if (cls.size() < 2) continue;  // no positive other than the anchor
      while (p == a) p = pick(cls, g);
    }
    t.a.push_back(a);
    t.p.push_back(p);
    t.n.push_back(pick_other(m, classes, labels[a], g));
  }
  return t;
}

}  // namespace mn::exp::sampling
