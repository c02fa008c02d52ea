// A user's image folder (image_folder.h): listing, decoding, box resizing, the
// content-keyed cache and the class split.
#include "data/image_folder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <exception>
#include <fstream>

#include <unistd.h>

#include "data/file_io.h"
#include "runtime/parallel.h"

// Header-only use (XXH_INLINE_ALL): no library to link or export.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace mn::data {
namespace fs = std::filesystem;
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool skipped_name(const std::string& name) {
  const std::string l = lower(name);
  return name.empty() || name[0] == '.' || l == "thumbs.db" || l == "desktop.ini";
}
bool image_extension(const fs::path& p) {
  const std::string e = lower(p.extension().string());
  return e == ".png" || e == ".jpg" || e == ".jpeg" || e == ".bmp" || e == ".pgm";
}

struct Listing {
  std::vector<std::string> classes;  // sorted
  std::vector<std::string> rel;      // relative paths, class by class, sorted within
  std::vector<int32_t> labels;
};

// The image files of one folder, sorted; a file of another kind is refused.
std::vector<std::string> images_in(const fs::path& dir, const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : list_dir(dir, "image folder")) {
    const std::string name = e.path().filename().string();
    if (skipped_name(name)) continue;
    if (e.is_directory()) {
      MN_THROW("image folder '", root, "': '", e.path().string(), "' is a folder inside a class folder; the layout is "
               "ROOT/<class>/<image> (one level of class folders)");
    }
    if (!regular_file_or_warn(e, "image folder")) continue;
    MN_DATA_CHECK(image_extension(e.path()), "image folder '", root, "': '", e.path().string(),
                  "' is not an image this reader takes (.png, .jpg, .jpeg, .bmp, .pgm): remove or convert it");
    out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Listing list_folder(const std::string& root, bool allow_unlabelled) {
  MN_DATA_CHECK(fs::is_directory(root), "image folder '", root, "': ", describe_file_type(root),
                ", not a folder; give a folder of class folders (ROOT/<class>/<image>)");
  Listing L;
  std::vector<std::string> loose;  // images directly in ROOT
  for (const auto& e : list_dir(root, "image folder")) {
    const std::string name = e.path().filename().string();
    if (skipped_name(name)) continue;
    if (e.is_directory()) L.classes.push_back(name);
    else if (image_extension(e.path())) loose.push_back(name);
  }
  std::sort(L.classes.begin(), L.classes.end());
  std::sort(loose.begin(), loose.end());
  if (!loose.empty()) {
    MN_DATA_CHECK(allow_unlabelled && L.classes.empty(), "image folder '", root, "': '", loose.front(),
                  "' lies directly in the folder", L.classes.empty() ? "" : " beside class folders",
                  "; training needs one folder per class (ROOT/<class>/<image>)");
    for (const std::string& f : images_in(root, root)) L.rel.push_back(f), L.labels.push_back(-1);
    return L;
  }
  MN_DATA_CHECK(!L.classes.empty(), "image folder '", root, "': no class folders and no images in it; the layout is "
                "ROOT/<class>/<image>");
  for (size_t c = 0; c < L.classes.size(); ++c) {
    const std::vector<std::string> files = images_in(fs::path(root) / L.classes[c], root);
    MN_DATA_CHECK(!files.empty(), "image folder '", root, "': the class folder '", L.classes[c],
                  "' holds no images (.png, .jpg, .jpeg, .bmp, .pgm): add some or remove it");
    for (const std::string& f : files) {
      L.rel.push_back(L.classes[c] + "/" + f);
      L.labels.push_back(static_cast<int32_t>(c));
    }
  }
  return L;
}

// ---- the cache ------------------------------------------------------------------
// Pack: "MNFOLD01", key (8), N, C, S (8 each), then per image its relative path
// (length 4 + bytes) and label (4), the class count and names, the pixels, and the
// XXH3-64 of everything before it (8).
constexpr char kMagic[9] = "MNFOLD01";

struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
  }
  void put_str(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    b.insert(b.end(), s.begin(), s.end());
  }
};
struct Reader {
  const std::vector<uint8_t>& b;
  size_t off = 0;
  bool ok = true;
  template <typename T>
  T get() {
    T v{};
    if (off + sizeof(T) > b.size()) return ok = false, v;
    std::memcpy(&v, b.data() + off, sizeof(T));
    off += sizeof(T);
    return v;
  }
  std::string get_str() {
    const uint32_t n = get<uint32_t>();
    if (!ok || off + n > b.size()) return ok = false, std::string();
    std::string s(reinterpret_cast<const char*>(b.data() + off), n);
    off += n;
    return s;
  }
};

uint64_t content_key(const std::string& root, const Listing& L, const FolderLoadOptions& o) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  const int32_t opts[2] = {o.channels, o.image_size};
  XXH3_64bits_update(st, opts, sizeof opts);
  for (const std::string& rel : L.rel) {
    const std::vector<uint8_t> bytes = read_regular_file((fs::path(root) / rel).string(), "image folder");
    const uint64_t h = XXH3_64bits(bytes.data(), bytes.size());
    XXH3_64bits_update(st, rel.data(), rel.size() + 1);
    XXH3_64bits_update(st, &h, sizeof h);
  }
  const uint64_t key = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return key;
}

std::string pack_path(const std::string& cache_dir, uint64_t key) {
  char tag[17];
  std::snprintf(tag, sizeof tag, "%016llx", static_cast<unsigned long long>(key));
  return (fs::path(cache_dir) / (std::string("folder_") + tag + ".mnpack")).string();
}

void write_pack(const std::string& path, uint64_t key, const FolderDataset& ds) {
  Bytes w;
  w.b.insert(w.b.end(), kMagic, kMagic + 8);
  w.put(key);
  w.put(static_cast<int64_t>(ds.size()));
  w.put(ds.images.size(1));
  w.put(ds.images.size(2));
  for (int64_t i = 0; i < ds.size(); ++i) w.put_str(ds.files[size_t(i)]), w.put(ds.labels[size_t(i)]);
  w.put(static_cast<int64_t>(ds.class_names.size()));
  for (const std::string& c : ds.class_names) w.put_str(c);
  const uint8_t* px = ds.images.data<uint8_t>();
  w.b.insert(w.b.end(), px, px + ds.images.numel());
  w.put(static_cast<uint64_t>(XXH3_64bits(w.b.data(), w.b.size())));
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(reinterpret_cast<const char*>(w.b.data()), static_cast<std::streamsize>(w.b.size()));
    if (!f) {
      std::fprintf(stderr, "image folder: warning: cannot write the cache '%s' (going on without it)\n", tmp.c_str());
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);  // atomic: readers never see a partial pack
  if (ec) fs::remove(tmp, ec);
}

// The pack's dataset, or false when it is missing, another key's or damaged.
bool read_pack(const std::string& path, uint64_t key, const FolderLoadOptions& o, FolderDataset& ds) {
  if (!fs::is_regular_file(path)) return false;
  std::vector<uint8_t> b;
  try {
    b = read_regular_file(path, "image folder cache");
  } catch (const std::exception&) {
    return false;
  }
  if (b.size() < 16 + 8 || std::memcmp(b.data(), kMagic, 8) != 0) return false;
  uint64_t sum = 0;
  std::memcpy(&sum, b.data() + b.size() - 8, 8);
  if (XXH3_64bits(b.data(), b.size() - 8) != sum) return false;
  Reader r{b, 8};
  if (r.get<uint64_t>() != key) return false;
  const int64_t n = r.get<int64_t>(), c = r.get<int64_t>(), s = r.get<int64_t>();
  if (!r.ok || c != o.channels || s != o.image_size || n < 0) return false;
  for (int64_t i = 0; i < n && r.ok; ++i) ds.files.push_back(r.get_str()), ds.labels.push_back(r.get<int32_t>());
  const int64_t nc = r.get<int64_t>();
  for (int64_t i = 0; i < nc && r.ok; ++i) ds.class_names.push_back(r.get_str());
  const size_t npx = size_t(n) * size_t(c) * size_t(s) * size_t(s);
  if (!r.ok || r.off + npx + 8 != b.size()) return false;
  ds.images = Tensor::from_host(b.data() + r.off, {n, c, s, s}, DType::U8);
  return true;
}

// Decodes and resizes every listed image (in parallel; errors name the file).
FolderDataset decode_all(const std::string& root, const Listing& L, const FolderLoadOptions& o) {
  FolderDataset ds;
  const int64_t n = static_cast<int64_t>(L.rel.size()), c = o.channels, s = o.image_size;
  ds.images = Tensor::empty({n, c, s, s}, DType::U8);
  uint8_t* out = ds.images.data<uint8_t>();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  parallel_for(0, n, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const std::string path = (fs::path(root) / L.rel[size_t(i)]).string();
      try {
        const std::vector<uint8_t> bytes = read_regular_file(path, "image folder");
        const std::vector<uint8_t> px = resize_box_planar(decode_image(bytes.data(), bytes.size(), o.channels, path), o.image_size);
        std::memcpy(out + i * c * s * s, px.data(), px.size());
      } catch (...) {
        errors[size_t(i)] = std::current_exception();  // the first, in file order, is thrown below
      }
    }
  });
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  ds.files = L.rel;
  ds.labels = L.labels;
  return ds;
}

// Per output index, the input indices it covers and their weights (summing to 1).
std::vector<std::vector<std::pair<int, double>>> box_weights(int in, int out) {
  std::vector<std::vector<std::pair<int, double>>> w(static_cast<size_t>(out));
  const double scale = double(in) / out;
  for (int o = 0; o < out; ++o) {
    const double lo = o * scale, hi = (o + 1) * scale;
    for (int i = int(std::floor(lo)); i < std::min(in, int(std::ceil(hi))); ++i) {
      const double part = std::min(hi, double(i + 1)) - std::max(lo, double(i));
      if (part > 0) w[size_t(o)].push_back({i, part / scale});
    }
  }
  return w;
}

}  // namespace

std::vector<uint8_t> resize_box_planar(const DecodedImage& img, int size) {
  MN_DATA_CHECK(size > 0 && img.height > 0 && img.width > 0, "resize: empty image or size");
  const auto wy = box_weights(img.height, size), wx = box_weights(img.width, size);
  const int C = img.channels;
  std::vector<uint8_t> out(static_cast<size_t>(C) * size * size);
  std::vector<double> row(static_cast<size_t>(img.width) * C);
  for (int y = 0; y < size; ++y) {
    std::fill(row.begin(), row.end(), 0.0);
    for (const auto& [iy, a] : wy[size_t(y)])
      for (size_t k = 0; k < row.size(); ++k) row[k] += a * img.pixels[size_t(iy) * row.size() + k];
    for (int x = 0; x < size; ++x)
      for (int c = 0; c < C; ++c) {
        double v = 0;
        for (const auto& [ix, b] : wx[size_t(x)]) v += b * row[size_t(ix) * size_t(C) + size_t(c)];
        out[(size_t(c) * size_t(size) + size_t(y)) * size_t(size) + size_t(x)] =
            static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
  }
  return out;
}

FolderDataset load_image_folder(const std::string& root, const FolderLoadOptions& o) {
  MN_DATA_CHECK(o.channels == 1 || o.channels == 3, "image folder: channels must be 1 (grey) or 3 (RGB), not ",
                o.channels);
  MN_DATA_CHECK(o.image_size >= 1 && o.image_size <= 4096, "image folder: image size must be 1..4096, not ",
                o.image_size);
  const Listing L = list_folder(root, o.allow_unlabelled);
  FolderDataset ds;
  std::string pack;
  uint64_t key = 0;
  if (!o.cache_dir.empty()) {
    key = content_key(root, L, o);
    pack = pack_path(o.cache_dir, key);
    if (read_pack(pack, key, o, ds) && ds.files == L.rel) {
      if (o.verbose) std::printf("image folder: %s: %lld images from the cache %s\n", root.c_str(),
                                 static_cast<long long>(ds.size()), pack.c_str());
      ds.root = root;
      return ds;
    }
    ds = FolderDataset{};
  }
  ds = decode_all(root, L, o);
  for (const std::string& c : L.classes) ds.class_names.push_back(c);
  ds.root = root;
  if (!pack.empty()) {
    write_pack(pack, key, ds);
    if (o.verbose) std::printf("image folder: %s: %lld images decoded, cached in %s\n", root.c_str(),
                               static_cast<long long>(ds.size()), pack.c_str());
  }
  return ds;
}

FolderDataset subset_classes(const FolderDataset& ds, const std::vector<int32_t>& classes) {
  std::vector<int32_t> new_label(ds.class_names.size(), -1);
  FolderDataset out;
  out.root = ds.root;
  for (size_t k = 0; k < classes.size(); ++k) {
    MN_DATA_CHECK(classes[k] >= 0 && classes[k] < ds.num_classes(), "subset_classes: class ", classes[k],
                  " is not one of the ", ds.num_classes());
    new_label[size_t(classes[k])] = static_cast<int32_t>(k);
    out.class_names.push_back(ds.class_names[size_t(classes[k])]);
  }
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < ds.size(); ++i)
    if (ds.labels[size_t(i)] >= 0 && new_label[size_t(ds.labels[size_t(i)])] >= 0) keep.push_back(i);
  const int64_t C = ds.images.size(1), S = ds.images.size(2), per = C * S * S;
  out.images = Tensor::empty({static_cast<int64_t>(keep.size()), C, S, S}, DType::U8);
  for (size_t j = 0; j < keep.size(); ++j) {
    std::memcpy(out.images.data<uint8_t>() + int64_t(j) * per, ds.images.data<uint8_t>() + keep[j] * per,
                size_t(per));
    out.files.push_back(ds.files[size_t(keep[j])]);
    out.labels.push_back(new_label[size_t(ds.labels[size_t(keep[j])])]);
  }
  return out;
}

ClassSplit split_classes(int64_t num_classes, double val_fraction, double test_fraction, Generator& g) {
  MN_DATA_CHECK(val_fraction >= 0 && test_fraction >= 0 && val_fraction + test_fraction < 1,
                "split_classes: the validation and test fractions (", val_fraction, ", ", test_fraction,
                ") must be >= 0 and sum to less than 1");
  auto count = [&](double f) {
    return f <= 0 ? int64_t(0) : std::max<int64_t>(1, std::llround(f * double(num_classes)));
  };
  const int64_t nv = count(val_fraction), nt = count(test_fraction);
  MN_DATA_CHECK(num_classes - nv - nt >= 2, "split_classes: ", num_classes, " classes leave ",
                num_classes - nv - nt, " to train on after ", nv, " for validation and ", nt,
                " for testing; metric learning needs at least 2 (add classes, or give smaller fractions)");
  const std::vector<int64_t> perm = randperm(num_classes, g);
  ClassSplit s;
  for (int64_t i = 0; i < num_classes; ++i) {
    auto& dst = i < nv ? s.val : i < nv + nt ? s.test : s.train;
    dst.push_back(static_cast<int32_t>(perm[size_t(i)]));
  }
  for (auto* v : {&s.train, &s.val, &s.test}) std::sort(v->begin(), v->end());
  return s;
}

}  // namespace mn::data
