// ImageDataset helpers: subsets, concatenation and stratified index splits.
#include "data/dataset.h"
#include "data/file_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mn::data {

std::vector<std::vector<int64_t>> ImageDataset::indices_by_class() const {
  std::vector<std::vector<int64_t>> by(class_names.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    MN_DATA_CHECK(labels[i] >= 0 && static_cast<size_t>(labels[i]) < by.size(),
             "ImageDataset: label ", labels[i], " of image ", i, " out of range [0, ", by.size(),
             ")");
    by[labels[i]].push_back(static_cast<int64_t>(i));
  }
  return by;
}

void ImageDataset::validate(const std::string& what) const {
  MN_DATA_CHECK(images.defined(), what, ": no images");
  MN_DATA_CHECK(images.dim() == 3 && images.dtype() == DType::U8 && images.is_cpu(), what,
           ": images must be (N, H, W) uint8 on the CPU, got ", images.desc());
  MN_DATA_CHECK(images.size(0) == size(), what, ": ", images.size(0), " images but ", size(), " labels");
  MN_DATA_CHECK(drawer.empty() || drawer.size() == labels.size(), what, ": drawer list size mismatch");
  MN_DATA_CHECK(files.empty() || files.size() == labels.size(), what, ": file list size mismatch");
  MN_DATA_CHECK(class_alphabet.empty() || class_alphabet.size() == class_names.size(), what,
           ": class_alphabet size mismatch");
  for (int32_t l : labels)
    MN_DATA_CHECK(l >= 0 && l < num_classes(), what, ": label ", l, " out of range [0, ", num_classes(),
             ")");
  for (int32_t a : class_alphabet)
    MN_DATA_CHECK(a >= 0 && static_cast<size_t>(a) < alphabet_names.size(), what,
             ": alphabet index out of range");
}

ImageDataset subset(const ImageDataset& ds, const std::vector<int64_t>& idx, bool relabel) {
  ImageDataset out;
  const int64_t H = ds.height(), W = ds.width(), n = static_cast<int64_t>(idx.size());
  const int64_t plane = H * W;
  out.images = Tensor::empty({n, H, W}, DType::U8);
  Tensor src = ds.images.contiguous();
  const uint8_t* s = src.data<uint8_t>();
  uint8_t* d = out.images.data<uint8_t>();
  std::vector<int32_t> remap(ds.class_names.size(), -1);
  std::vector<int32_t> alpha_remap(ds.alphabet_names.size(), -1);
  if (!relabel) {
    out.class_names = ds.class_names;
    out.class_alphabet = ds.class_alphabet;
    out.alphabet_names = ds.alphabet_names;
  } else {
    // Renumber in order of the original class index so the result does not
    // depend on the order of `idx`.
    std::vector<char> used(ds.class_names.size(), 0);
    for (int64_t i : idx) {
      MN_DATA_CHECK(i >= 0 && i < ds.size(), "subset: index ", i, " out of range [0, ", ds.size(), ")");
      used[ds.labels[i]] = 1;
    }
    for (size_t c = 0; c < used.size(); ++c) {
      if (!used[c]) continue;
      remap[c] = static_cast<int32_t>(out.class_names.size());
      out.class_names.push_back(ds.class_names[c]);
      if (!ds.class_alphabet.empty()) {
        int32_t a = ds.class_alphabet[c];
        if (alpha_remap[a] < 0) {
          alpha_remap[a] = static_cast<int32_t>(out.alphabet_names.size());
          out.alphabet_names.push_back(ds.alphabet_names[a]);
        }
        out.class_alphabet.push_back(alpha_remap[a]);
      }
    }
    if (ds.class_alphabet.empty()) out.alphabet_names = ds.alphabet_names;
  }
  out.labels.reserve(n);
  for (int64_t k = 0; k < n; ++k) {
    int64_t i = idx[k];
    MN_DATA_CHECK(i >= 0 && i < ds.size(), "subset: index ", i, " out of range [0, ", ds.size(), ")");
    std::memcpy(d + k * plane, s + i * plane, static_cast<size_t>(plane));
    out.labels.push_back(relabel ? remap[ds.labels[i]] : ds.labels[i]);
    if (!ds.drawer.empty()) out.drawer.push_back(ds.drawer[i]);
    if (!ds.files.empty()) out.files.push_back(ds.files[i]);
  }
  out.note = ds.note;
  return out;
}

ImageDataset concat(const ImageDataset& a, const ImageDataset& b) {
  MN_DATA_CHECK(a.height() == b.height() && a.width() == b.width(), "concat: image sizes differ (",
           a.height(), "x", a.width(), " vs ", b.height(), "x", b.width(), ")");
  ImageDataset out;
  const int64_t plane = a.height() * a.width();
  out.images = Tensor::empty({a.size() + b.size(), a.height(), a.width()}, DType::U8);
  Tensor sa = a.images.contiguous(), sb = b.images.contiguous();
  std::memcpy(out.images.data<uint8_t>(), sa.data<uint8_t>(), static_cast<size_t>(a.size() * plane));
  std::memcpy(out.images.data<uint8_t>() + a.size() * plane, sb.data<uint8_t>(),
              static_cast<size_t>(b.size() * plane));
  const int32_t c0 = static_cast<int32_t>(a.class_names.size());
  const int32_t a0 = static_cast<int32_t>(a.alphabet_names.size());
  out.labels = a.labels;
  for (int32_t l : b.labels) out.labels.push_back(l + c0);
  out.class_names = a.class_names;
  out.class_names.insert(out.class_names.end(), b.class_names.begin(), b.class_names.end());
  out.alphabet_names = a.alphabet_names;
  out.alphabet_names.insert(out.alphabet_names.end(), b.alphabet_names.begin(),
                            b.alphabet_names.end());
  out.class_alphabet = a.class_alphabet;
  for (int32_t x : b.class_alphabet) out.class_alphabet.push_back(x + a0);
  if (!a.drawer.empty() && !b.drawer.empty()) {
    out.drawer = a.drawer;
    out.drawer.insert(out.drawer.end(), b.drawer.begin(), b.drawer.end());
  }
  if (!a.files.empty() && !b.files.empty()) {
    out.files = a.files;
    out.files.insert(out.files.end(), b.files.begin(), b.files.end());
  }
  return out;
}

namespace {
std::vector<std::vector<int64_t>> group(const std::vector<int32_t>& labels) {
  int32_t mx = -1;
  for (int32_t l : labels) {
    MN_DATA_CHECK(l >= 0, "stratified split: negative label ", l);
    mx = std::max(mx, l);
  }
  std::vector<std::vector<int64_t>> by(static_cast<size_t>(mx + 1));
  for (size_t i = 0; i < labels.size(); ++i) by[labels[i]].push_back(static_cast<int64_t>(i));
  return by;
}
void shuffle(std::vector<int64_t>& v, Generator& g) {
  std::vector<int64_t> p = randperm(static_cast<int64_t>(v.size()), g);
  std::vector<int64_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[p[i]];
  v.swap(out);
}
}  // namespace

IndexSplit stratified_split(const std::vector<int32_t>& labels, double train_frac, double val_frac,
                            double test_frac, Generator& g) {
  MN_DATA_CHECK(train_frac >= 0 && val_frac >= 0 && test_frac >= 0 &&
               train_frac + val_frac + test_frac <= 1.0 + 1e-9,
           "stratified_split: fractions must be >= 0 and sum to <= 1 (got ", train_frac, ", ",
           val_frac, ", ", test_frac, ")");
  const bool all = train_frac + val_frac + test_frac >= 1.0 - 1e-9;
  IndexSplit s;
  for (auto& cls : group(labels)) {
    if (cls.empty()) continue;
    shuffle(cls, g);
    const int64_t n = static_cast<int64_t>(cls.size());
    const int64_t nv = static_cast<int64_t>(std::floor(val_frac * n + 1e-9));
    const int64_t nt = static_cast<int64_t>(std::floor(test_frac * n + 1e-9));
    const int64_t ntr = all ? n - nv - nt : static_cast<int64_t>(std::floor(train_frac * n + 1e-9));
    s.val.insert(s.val.end(), cls.begin(), cls.begin() + nv);
    s.test.insert(s.test.end(), cls.begin() + nv, cls.begin() + nv + nt);
    s.train.insert(s.train.end(), cls.begin() + nv + nt, cls.begin() + nv + nt + ntr);
  }
  std::sort(s.train.begin(), s.train.end());
  std::sort(s.val.begin(), s.val.end());
  std::sort(s.test.begin(), s.test.end());
  return s;
}

std::vector<int64_t> stratified_subset(const std::vector<int32_t>& labels, double fraction,
                                       Generator& g, bool min_one_per_class) {
  MN_DATA_CHECK(fraction > 0 && fraction <= 1, "stratified_subset: fraction must be in (0, 1], got ",
           fraction);
  std::vector<int64_t> out;
  for (auto& cls : group(labels)) {
    if (cls.empty()) continue;
    shuffle(cls, g);
    int64_t k = static_cast<int64_t>(std::llround(fraction * static_cast<double>(cls.size())));
    if (min_one_per_class) k = std::max<int64_t>(k, 1);
    k = std::min<int64_t>(k, static_cast<int64_t>(cls.size()));
    out.insert(out.end(), cls.begin(), cls.begin() + k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> indices_with_labels(const std::vector<int32_t>& labels,
                                         const std::vector<int32_t>& classes, bool keep) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < labels.size(); ++i) {
    bool in = std::find(classes.begin(), classes.end(), labels[i]) != classes.end();
    if (in == keep) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

}  // namespace mn::data

#include <cstdlib>
#include <filesystem>

namespace mn::data {

std::string find_dataset_dir(const std::string& name) {
  namespace fs = std::filesystem;
  std::vector<std::string> bases;
  for (const char* v : {"MN_DATA_DIR", "DATA_DIR"}) {
    const char* e = std::getenv(v);
    if (e && *e) bases.emplace_back(e);
  }
  bases.emplace_back("datasets");
  bases.emplace_back("../shared/datasets");
  for (const auto& b : bases) {
    std::error_code ec;
    fs::path p = fs::path(b) / name;
    if (fs::is_directory(p, ec)) return p.string();
  }
  return "";
}

std::string default_cache_dir() {
  if (const char* e = std::getenv("MN_CACHE_DIR"); e && *e) return e;
  if (const char* e = std::getenv("XDG_CACHE_HOME"); e && *e) return std::string(e) + "/metricnet";
  if (const char* e = std::getenv("HOME"); e && *e) return std::string(e) + "/.cache/metricnet";
  return ".mn_cache";
}

}  // namespace mn::data
