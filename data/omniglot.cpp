// Omniglot indexing, PNG decoding (parallel), the packed cache and the splits.
#include "data/omniglot.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "data/image_io.h"
#include "runtime/parallel.h"

namespace fs = std::filesystem;

namespace mn::data {

namespace {

thread_local int g_last_cache_action = 0;

struct Entry {
  std::string rel;  // "Alphabet/characterNN/<id>_<drawer>.png"
  int32_t cls;
  int32_t drawer;
  uint64_t size;
  int64_t mtime_ns;
};

struct Listing {
  std::vector<std::string> alphabets;
  std::vector<std::string> classes;      // "Alphabet/characterNN"
  std::vector<int32_t> class_alphabet;
  std::vector<Entry> files;
  uint64_t hash = 0;
};

std::vector<std::string> sorted_subdirs(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec)) out.push_back(it->path().filename().string());
  }
  MN_CHECK(!ec, "omniglot: cannot list '", dir.string(), "': ", ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

inline void fnv(uint64_t& h, const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ULL;
  }
}

// "<id>_<drawer>.png" -> drawer (1..99); throws on any other name.
int32_t parse_drawer(const std::string& name, const std::string& path) {
  size_t us = name.rfind('_');
  size_t dot = name.rfind(".png");
  bool ok = us != std::string::npos && dot != std::string::npos && dot == name.size() - 4 &&
            us > 0 && dot > us + 1;
  int32_t d = 0;
  if (ok) {
    for (size_t i = 0; i < us; ++i) ok = ok && std::isdigit(static_cast<unsigned char>(name[i]));
    for (size_t i = us + 1; i < dot; ++i) {
      ok = ok && std::isdigit(static_cast<unsigned char>(name[i]));
      if (ok) d = d * 10 + (name[i] - '0');
    }
  }
  MN_CHECK(ok && d >= 1 && d <= 99, "omniglot: '", path,
           "': file name is not of the form <id>_<drawer>.png");
  return d;
}

Listing scan(const std::string& set_dir) {
  std::error_code ec;
  MN_CHECK(fs::is_directory(set_dir, ec), "omniglot: missing folder '", set_dir, "'");
  Listing L;
  L.alphabets = sorted_subdirs(set_dir);
  MN_CHECK(!L.alphabets.empty(), "omniglot: folder '", set_dir, "' holds no alphabet folders");
  uint64_t h = 1469598103934665603ULL;
  for (size_t a = 0; a < L.alphabets.size(); ++a) {
    fs::path adir = fs::path(set_dir) / L.alphabets[a];
    std::vector<std::string> chars = sorted_subdirs(adir);
    MN_CHECK(!chars.empty(), "omniglot: empty alphabet '", adir.string(),
             "' (no character folders)");
    for (const auto& c : chars) {
      fs::path cdir = adir / c;
      std::vector<std::string> names;
      for (fs::directory_iterator it(cdir, ec), end; !ec && it != end; it.increment(ec)) {
        std::string n = it->path().filename().string();
        if (n.size() > 4 && n.compare(n.size() - 4, 4, ".png") == 0) names.push_back(n);
      }
      MN_CHECK(!ec, "omniglot: cannot list '", cdir.string(), "': ", ec.message());
      MN_CHECK(!names.empty(), "omniglot: character folder '", cdir.string(), "' holds no PNG files");
      std::sort(names.begin(), names.end());
      const int32_t cls = static_cast<int32_t>(L.classes.size());
      L.classes.push_back(L.alphabets[a] + "/" + c);
      L.class_alphabet.push_back(static_cast<int32_t>(a));
      for (const auto& n : names) {
        std::string full = (cdir / n).string();
        struct stat st {};
        MN_CHECK(::stat(full.c_str(), &st) == 0, "omniglot: cannot stat '", full, "'");
        Entry e;
        e.rel = L.classes.back() + "/" + n;
        e.cls = cls;
        e.drawer = parse_drawer(n, full);
        e.size = static_cast<uint64_t>(st.st_size);
        e.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
        fnv(h, e.rel.data(), e.rel.size() + 0);
        fnv(h, "\0", 1);
        fnv(h, &e.size, sizeof e.size);
        fnv(h, &e.mtime_ns, sizeof e.mtime_ns);
        L.files.push_back(std::move(e));
      }
    }
  }
  uint64_t n = L.files.size();
  fnv(h, &n, sizeof n);
  L.hash = h;
  return L;
}

ImageDataset decode_all(const std::string& set_dir, const Listing& L, int expected) {
  const int64_t N = static_cast<int64_t>(L.files.size());
  // Decode the first image to learn the size when no size is imposed.
  int H = expected, W = expected;
  if (expected <= 0) {
    GrayImage first = read_gray_image((fs::path(set_dir) / L.files[0].rel).string());
    H = first.height;
    W = first.width;
  }
  ImageDataset ds;
  ds.images = Tensor::empty({N, H, W}, DType::U8);
  uint8_t* out = ds.images.data<uint8_t>();
  const size_t plane = static_cast<size_t>(H) * W;
  parallel_for(0, N, 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      std::string path = (fs::path(set_dir) / L.files[i].rel).string();
      GrayImage img = read_gray_image(path);
      MN_CHECK(img.height == H && img.width == W, "omniglot: '", path, "': wrong image size ",
               img.height, "x", img.width, ", expected ", H, "x", W);
      std::memcpy(out + i * plane, img.pixels.data(), plane);
    }
  });
  ds.alphabet_names = L.alphabets;
  ds.class_names = L.classes;
  ds.class_alphabet = L.class_alphabet;
  ds.labels.reserve(N);
  ds.drawer.reserve(N);
  ds.files.reserve(N);
  for (const auto& e : L.files) {
    ds.labels.push_back(e.cls);
    ds.drawer.push_back(e.drawer);
    ds.files.push_back(e.rel);
  }
  return ds;
}

// ---- pack file --------------------------------------------------------------
constexpr char kMagic[8] = {'M', 'N', 'P', 'A', 'C', 'K', '0', '1'};

struct Writer {
  std::vector<uint8_t> buf;
  void raw(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    buf.insert(buf.end(), b, b + n);
  }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
};

struct Reader {
  const uint8_t* p;
  size_t n, pos = 0;
  const std::string& name;
  void need(size_t k) {
    MN_CHECK(pos + k <= n, "omniglot cache: '", name, "' is truncated");
  }
  void raw(void* d, size_t k) {
    need(k);
    std::memcpy(d, p + pos, k);
    pos += k;
  }
  uint32_t u32() { uint32_t v; raw(&v, 4); return v; }
  uint64_t u64() { uint64_t v; raw(&v, 8); return v; }
  std::string str() {
    uint32_t k = u32();
    need(k);
    std::string s(reinterpret_cast<const char*>(p + pos), k);
    pos += k;
    return s;
  }
};

std::string pack_path(const std::string& cache_dir, const std::string& set_dir) {
  std::string set = fs::path(set_dir).lexically_normal().filename().string();
  if (set.empty()) set = fs::path(set_dir).lexically_normal().parent_path().filename().string();
  return (fs::path(cache_dir) / ("omniglot_" + set + ".mnpack")).string();
}

void write_pack(const std::string& path, const ImageDataset& ds, uint64_t hash) {
  const int64_t N = ds.size(), H = ds.height(), W = ds.width();
  const size_t total = static_cast<size_t>(N * H * W);
  const uint8_t* px = ds.images.data<uint8_t>();
  bool binary = true;
  for (size_t i = 0; i < total && binary; ++i) binary = px[i] == 0 || px[i] == 255;
  Writer w;
  w.raw(kMagic, 8);
  w.u64(hash);
  w.u32(static_cast<uint32_t>(N));
  w.u32(static_cast<uint32_t>(H));
  w.u32(static_cast<uint32_t>(W));
  w.u32(binary ? 1 : 0);
  w.u32(static_cast<uint32_t>(ds.alphabet_names.size()));
  for (const auto& a : ds.alphabet_names) w.str(a);
  w.u32(static_cast<uint32_t>(ds.class_names.size()));
  for (size_t c = 0; c < ds.class_names.size(); ++c) {
    w.str(ds.class_names[c]);
    w.u32(static_cast<uint32_t>(ds.class_alphabet[c]));
  }
  for (int64_t i = 0; i < N; ++i) {
    w.u32(static_cast<uint32_t>(ds.labels[i]));
    w.u32(static_cast<uint32_t>(ds.drawer[i]));
    w.str(ds.files[i]);
  }
  std::vector<uint8_t> payload;
  if (binary) {
    payload.assign((total + 7) / 8, 0);
    for (size_t i = 0; i < total; ++i)
      if (px[i]) payload[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
  } else {
    payload.assign(px, px + total);
  }
  w.u64(payload.size());
  w.raw(payload.data(), payload.size());
  uint64_t check = 1469598103934665603ULL;
  fnv(check, payload.data(), std::min<size_t>(payload.size(), 1 << 16));
  w.u64(check);

  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  MN_CHECK(f != nullptr, "omniglot cache: cannot create '", tmp, "'");
  size_t put = std::fwrite(w.buf.data(), 1, w.buf.size(), f);
  bool ok = put == w.buf.size() && std::fclose(f) == 0;
  if (!ok) {
    std::remove(tmp.c_str());
    MN_THROW("omniglot cache: write error on '", tmp, "'");
  }
  fs::rename(tmp, path, ec);  // atomic replace: readers never see a partial pack
  MN_CHECK(!ec, "omniglot cache: cannot rename '", tmp, "' to '", path, "': ", ec.message());
}

// Returns false (no throw) when the pack is absent or for another listing;
// throws only on I/O errors of an existing matching pack.
bool read_pack(const std::string& path, uint64_t hash, ImageDataset& ds) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::vector<uint8_t> bytes;
  try {
    bytes = read_file_bytes(path);
  } catch (const Error&) {
    return false;
  }
  try {
    Reader r{bytes.data(), bytes.size(), 0, path};
    char magic[8];
    r.raw(magic, 8);
    if (std::memcmp(magic, kMagic, 8) != 0) return false;
    if (r.u64() != hash) return false;
    const int64_t N = r.u32(), H = r.u32(), W = r.u32();
    const bool binary = r.u32() == 1;
    // Counts from a damaged pack must not drive huge allocations (bad_alloc is
    // not an mn::Error and would escape): each image needs >= 12 bytes (label,
    // drawer, name length), each alphabet >= 4, each class >= 8.
    auto left = [&] { return static_cast<uint64_t>(bytes.size() - r.pos); };
    if (H > 65536 || W > 65536 || static_cast<uint64_t>(N) > left() / 12) return false;
    ImageDataset out;
    const uint32_t A = r.u32();
    if (A > left() / 4) return false;
    out.alphabet_names.resize(A);
    for (auto& a : out.alphabet_names) a = r.str();
    const uint32_t C = r.u32();
    if (C > left() / 8) return false;
    for (uint32_t c = 0; c < C; ++c) {
      out.class_names.push_back(r.str());
      out.class_alphabet.push_back(static_cast<int32_t>(r.u32()));
    }
    out.labels.resize(N);
    out.drawer.resize(N);
    out.files.resize(N);
    for (int64_t i = 0; i < N; ++i) {
      out.labels[i] = static_cast<int32_t>(r.u32());
      out.drawer[i] = static_cast<int32_t>(r.u32());
      out.files[i] = r.str();
    }
    const size_t total = static_cast<size_t>(N * H * W);
    const uint64_t plen = r.u64();
    if (plen != (binary ? (total + 7) / 8 : total)) return false;
    r.need(plen + 8);
    const uint8_t* payload = bytes.data() + r.pos;
    r.pos += plen;
    uint64_t check = 1469598103934665603ULL;
    fnv(check, payload, std::min<size_t>(plen, 1 << 16));
    if (r.u64() != check || r.pos != bytes.size()) return false;
    out.images = Tensor::empty({N, H, W}, DType::U8);
    uint8_t* px = out.images.data<uint8_t>();
    if (binary) {
      // 8 pixels per byte through a 256-entry table of 8-byte patterns.
      static const auto lut = [] {
        std::vector<uint64_t> t(256);
        for (int b = 0; b < 256; ++b) {
          uint64_t v = 0;
          for (int k = 0; k < 8; ++k)
            if (b & (1 << k)) v |= 0xFFULL << (8 * k);  // little-endian byte k = pixel k
          t[b] = v;
        }
        return t;
      }();
      const size_t full = total / 8;
      parallel_for(0, static_cast<int64_t>(full), 1 << 16, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) std::memcpy(px + 8 * i, &lut[payload[i]], 8);
      });
      for (size_t i = full * 8; i < total; ++i)
        px[i] = (payload[i >> 3] >> (i & 7)) & 1 ? 255 : 0;
    } else {
      std::memcpy(px, payload, total);
    }
    out.validate(path);
    ds = std::move(out);
    return true;
  } catch (const Error&) {
    return false;  // damaged pack: the caller rebuilds it
  }
}

}  // namespace

int omniglot_last_cache_action() { return g_last_cache_action; }

uint64_t omniglot_listing_hash(const std::string& set_dir) { return scan(set_dir).hash; }

ImageDataset load_omniglot_set(const std::string& set_dir, const OmniglotLoadOptions& opt) {
  Listing L = scan(set_dir);
  if (!opt.cache_dir.empty()) {
    const std::string pack = pack_path(opt.cache_dir, set_dir);
    ImageDataset ds;
    if (read_pack(pack, L.hash, ds)) {
      const bool size_ok = opt.expected_size <= 0 ||
                           (ds.height() == opt.expected_size && ds.width() == opt.expected_size);
      if (size_ok) {
        g_last_cache_action = 1;
        if (opt.verbose) std::cerr << "omniglot: loaded " << ds.size() << " images from " << pack << "\n";
        return ds;
      }
    }
    ds = decode_all(set_dir, L, opt.expected_size);
    ds.validate(set_dir);
    write_pack(pack, ds, L.hash);
    g_last_cache_action = 2;
    if (opt.verbose) std::cerr << "omniglot: decoded " << ds.size() << " PNGs, wrote " << pack << "\n";
    return ds;
  }
  g_last_cache_action = 0;
  ImageDataset ds = decode_all(set_dir, L, opt.expected_size);
  ds.validate(set_dir);
  return ds;
}

std::vector<int64_t> indices_with_drawers(const ImageDataset& ds, int lo, int hi) {
  MN_CHECK(ds.drawer.size() == ds.labels.size(), "indices_with_drawers: dataset has no drawers");
  std::vector<int64_t> out;
  for (size_t i = 0; i < ds.drawer.size(); ++i)
    if (ds.drawer[i] >= lo && ds.drawer[i] <= hi) out.push_back(static_cast<int64_t>(i));
  return out;
}

OmniglotSplits load_omniglot_splits(const OmniglotSplitOptions& opt) {
  MN_CHECK(opt.train_max_drawer >= 1 && opt.val_drawer_lo >= 1 &&
               opt.val_drawer_lo <= opt.val_drawer_hi,
           "omniglot splits: bad drawer options (train_max_drawer ", opt.train_max_drawer,
           ", val drawers ", opt.val_drawer_lo, "..", opt.val_drawer_hi, ")");
  OmniglotLoadOptions lo;
  lo.cache_dir = opt.cache_dir;
  ImageDataset bg = load_omniglot_set((fs::path(opt.root) / "images_background").string(), lo);
  OmniglotSplits s;
  s.train = subset(bg, indices_with_drawers(bg, 1, opt.train_max_drawer));
  if (opt.validation == OmniglotValidation::EvaluationAlphabets) {
    ImageDataset ev = load_omniglot_set((fs::path(opt.root) / "images_evaluation").string(), lo);
    s.val = subset(ev, indices_with_drawers(ev, opt.val_drawer_lo, opt.val_drawer_hi));
  } else {
    MN_CHECK(opt.val_drawer_lo > opt.train_max_drawer,
             "omniglot splits: held-out validation drawers ", opt.val_drawer_lo, "..",
             opt.val_drawer_hi, " overlap the training drawers 1..", opt.train_max_drawer);
    s.val = subset(bg, indices_with_drawers(bg, opt.val_drawer_lo, opt.val_drawer_hi));
  }
  MN_CHECK(s.train.size() > 0 && s.val.size() > 0, "omniglot splits: empty split (train ",
           s.train.size(), ", val ", s.val.size(), ")");
  s.description = detail::str(
      "train: ", s.train.alphabet_names.size(), " alphabets, ", s.train.num_classes(),
      " classes, ", s.train.size(), " images (drawers 1..", opt.train_max_drawer, "); val (",
      opt.validation == OmniglotValidation::EvaluationAlphabets ? "evaluation alphabets"
                                                                : "held-out drawers",
      "): ", s.val.alphabet_names.size(), " alphabets, ", s.val.num_classes(), " classes, ",
      s.val.size(), " images (drawers ", opt.val_drawer_lo, "..", opt.val_drawer_hi, ")");
  return s;
}

}  // namespace mn::data
