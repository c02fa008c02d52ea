// Omniglot indexing, PNG decoding (parallel), the packed cache and the splits.
#include "data/omniglot.h"
#include "data/file_io.h"

#include <unistd.h>
// Header-only use (XXH_INLINE_ALL): no library to link or export.
#define XXH_INLINE_ALL
#include <xxhash.h>

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
};

struct Listing {
  std::vector<std::string> alphabets;
  std::vector<std::string> classes;      // "Alphabet/characterNN"
  std::vector<int32_t> class_alphabet;
  std::vector<Entry> files;
};

// The files' bytes (read once: hashed for the cache key, decoded on a miss) and
// the key: XXH3-64 over every (relative path, content hash) in listing order.
struct Contents {
  std::vector<std::vector<uint8_t>> bytes;  // (N) whole files
  uint64_t key = 0;
};

std::vector<std::string> sorted_subdirs(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code tec;  // (not `ec`: a link that cannot be followed must not end the listing)
    if (it->is_directory(tec)) {
      out.push_back(it->path().filename().string());
      continue;
    }
    // A symbolic link that cannot be followed (dangling, or a loop) is skipped
    // with a warning, as files that are not regular are: it may have been meant
    // as an alphabet or character folder. (Plain files here are not folders and
    // are ignored as before.)
    std::error_code lec, sec;
    if (it->is_symlink(lec)) {
      (void)fs::status(it->path(), sec);
      if (sec)
        std::cerr << "omniglot: skipping '" << it->path().string()
                  << "': a symbolic link that cannot be followed (" << sec.message()
                  << "), not a folder\n";
    }
  }
  MN_DATA_CHECK(!ec, "omniglot: cannot list '", dir.string(), "': ", ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

// "<id>_<drawer>.png" -> drawer (1..99); throws on any other name.
int32_t parse_drawer(const std::string& name, const std::string& path) {
  const size_t us = name.rfind('_');
  const bool shape = us != std::string::npos && us > 0 && name.size() > 4 &&
                     name.compare(name.size() - 4, 4, ".png") == 0 && name.size() - 4 > us + 1;
  int64_t id = 0, d = 0;
  // parse_int_in_range rejects overlong digit strings (the old loop overflowed).
  const bool ok = shape && parse_int_in_range(name.substr(0, us), 0, INT32_MAX, &id) &&
                  parse_int_in_range(name.substr(us + 1, name.size() - 4 - us - 1), 1, 99, &d);
  MN_DATA_CHECK(ok, "omniglot: '", path,
                "': file name is not of the form <id>_<drawer>.png (drawer 1..99): rename or "
                "remove the file");
  return static_cast<int32_t>(d);
}

Listing scan(const std::string& set_dir) {
  std::error_code ec;
  MN_DATA_CHECK(fs::is_directory(set_dir, ec), "omniglot: missing folder '", set_dir, "'");
  Listing L;
  L.alphabets = sorted_subdirs(set_dir);
  MN_DATA_CHECK(!L.alphabets.empty(), "omniglot: folder '", set_dir,
                "' holds no alphabet folders (expected <set>/<Alphabet>/characterNN/*.png)");
  for (size_t a = 0; a < L.alphabets.size(); ++a) {
    fs::path adir = fs::path(set_dir) / L.alphabets[a];
    std::vector<std::string> chars = sorted_subdirs(adir);
    MN_DATA_CHECK(!chars.empty(), "omniglot: empty alphabet '", adir.string(),
                  "' (no character folders): remove it or restore its characters");
    for (const auto& c : chars) {
      fs::path cdir = adir / c;
      std::vector<std::string> names;
      for (fs::directory_iterator it(cdir, ec), end; !ec && it != end; it.increment(ec)) {
        std::string n = it->path().filename().string();
        // A directory or FIFO named *.png is skipped with a warning, never read.
        if (n.size() > 4 && n.compare(n.size() - 4, 4, ".png") == 0 &&
            regular_file_or_warn(*it, "omniglot"))
          names.push_back(n);
      }
      MN_DATA_CHECK(!ec, "omniglot: cannot list '", cdir.string(), "': ", ec.message());
      MN_DATA_CHECK(!names.empty(), "omniglot: character folder '", cdir.string(),
                    "' holds no PNG files: remove it or restore its images");
      std::sort(names.begin(), names.end());
      const int32_t cls = static_cast<int32_t>(L.classes.size());
      L.classes.push_back(L.alphabets[a] + "/" + c);
      L.class_alphabet.push_back(static_cast<int32_t>(a));
      for (const auto& n : names) {
        Entry e;
        e.rel = L.classes.back() + "/" + n;
        e.cls = cls;
        e.drawer = parse_drawer(n, (cdir / n).string());
        L.files.push_back(std::move(e));
      }
    }
  }
  return L;
}

// Reads every file (in parallel) and keys the set on its content: a pack is
// reused only for byte-identical images under the same names. Size and mtime
// are not enough (an image rewritten with the same size and mtime kept a stale
// pack in use). XXH3 hashes at several GB/s, so the key costs little next to
// reading the files, which any load does anyway.
Contents read_contents(const std::string& set_dir, const Listing& L) {
  Contents C;
  const int64_t N = static_cast<int64_t>(L.files.size());
  C.bytes.resize(static_cast<size_t>(N));
  std::vector<XXH64_hash_t> h(static_cast<size_t>(N));
  parallel_for(0, N, 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      C.bytes[i] = read_regular_file((fs::path(set_dir) / L.files[i].rel).string(), "omniglot");
      h[i] = XXH3_64bits(C.bytes[i].data(), C.bytes[i].size());
    }
  });
  XXH3_state_t* st = XXH3_createState();
  MN_DATA_CHECK(st != nullptr, "omniglot: out of memory while hashing '", set_dir, "'");
  XXH3_64bits_reset(st);
  for (int64_t i = 0; i < N; ++i) {
    XXH3_64bits_update(st, L.files[i].rel.data(), L.files[i].rel.size() + 1);  // + '\0'
    XXH3_64bits_update(st, &h[i], sizeof h[i]);
  }
  const uint64_t n = static_cast<uint64_t>(N);
  XXH3_64bits_update(st, &n, sizeof n);
  C.key = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return C;
}

ImageDataset decode_all(const std::string& set_dir, const Listing& L, const Contents& C,
                        int expected) {
  const int64_t N = static_cast<int64_t>(L.files.size());
  // Decode the first image to learn the size when no size is imposed.
  int H = expected, W = expected;
  if (expected <= 0) {
    GrayImage first = decode_gray_image(C.bytes[0].data(), C.bytes[0].size(),
                                        (fs::path(set_dir) / L.files[0].rel).string());
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
      GrayImage img = decode_gray_image(C.bytes[i].data(), C.bytes[i].size(), path);
      MN_DATA_CHECK(img.height == H && img.width == W, "omniglot: '", path, "': wrong image size ",
                    img.height, "x", img.width, ", expected ", H, "x", W,
                    ": replace or remove the image");
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
// Version 02: the checksum covers every byte before it (01 covered only the
// first 64 KiB of the pixels, so later damage went unnoticed) and the key is the
// content key. A version-01 pack fails the magic check and is rebuilt.
constexpr char kMagic[8] = {'M', 'N', 'P', 'A', 'C', 'K', '0', '2'};

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
    MN_DATA_CHECK(pos + k <= n, "omniglot cache: '", name, "' is truncated");
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

// One pack per set folder, named after the folder and a hash of its resolved
// absolute path: two folders of the same name (a --test-dir called
// images_evaluation and the real one) keep separate packs instead of
// overwriting each other's on every load.
std::string pack_path(const std::string& cache_dir, const std::string& set_dir) {
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(fs::absolute(set_dir), ec);
  if (ec) abs = fs::absolute(set_dir).lexically_normal();
  std::string set = abs.filename().string();
  if (set.empty()) set = abs.parent_path().filename().string();
  const std::string where = abs.string();
  char tag[17];
  std::snprintf(tag, sizeof tag, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(where.data(), where.size())));
  return (fs::path(cache_dir) / ("omniglot_" + set + "_" + tag + ".mnpack")).string();
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
  w.u64(XXH3_64bits(w.buf.data(), w.buf.size()));

  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  MN_DATA_CHECK(f != nullptr, "omniglot cache: cannot create '", tmp, "'");
  size_t put = std::fwrite(w.buf.data(), 1, w.buf.size(), f);
  bool ok = put == w.buf.size() && std::fclose(f) == 0;
  if (!ok) {
    std::remove(tmp.c_str());
    MN_THROW("omniglot cache: write error on '", tmp, "'");
  }
  fs::rename(tmp, path, ec);  // atomic replace: readers never see a partial pack
  MN_DATA_CHECK(!ec, "omniglot cache: cannot rename '", tmp, "' to '", path, "': ", ec.message());
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
    // Checksum first: every byte before the trailing 8 must hash to them.
    if (bytes.size() < 16) return false;
    uint64_t stored = 0;
    std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
    if (XXH3_64bits(bytes.data(), bytes.size() - 8) != stored) return false;
    Reader r{bytes.data(), bytes.size() - 8, 0, path};
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
    r.need(plen);
    const uint8_t* payload = bytes.data() + r.pos;
    r.pos += plen;
    if (r.pos != r.n) return false;
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

uint64_t omniglot_listing_hash(const std::string& set_dir) {
  const Listing L = scan(set_dir);
  return read_contents(set_dir, L).key;
}

ImageDataset load_omniglot_set(const std::string& set_dir, const OmniglotLoadOptions& opt) {
  Listing L = scan(set_dir);
  Contents C = read_contents(set_dir, L);
  if (!opt.cache_dir.empty()) {
    const std::string pack = pack_path(opt.cache_dir, set_dir);
    ImageDataset ds;
    if (read_pack(pack, C.key, ds)) {
      const bool size_ok = opt.expected_size <= 0 ||
                           (ds.height() == opt.expected_size && ds.width() == opt.expected_size);
      if (size_ok) {
        g_last_cache_action = 1;
        if (opt.verbose) std::cerr << "omniglot: loaded " << ds.size() << " images from " << pack << "\n";
        return ds;
      }
    }
    ds = decode_all(set_dir, L, C, opt.expected_size);
    ds.validate(set_dir);
    write_pack(pack, ds, C.key);
    g_last_cache_action = 2;
    if (opt.verbose) std::cerr << "omniglot: decoded " << ds.size() << " PNGs, wrote " << pack << "\n";
    return ds;
  }
  g_last_cache_action = 0;
  ImageDataset ds = decode_all(set_dir, L, C, opt.expected_size);
  ds.validate(set_dir);
  return ds;
}

std::vector<int64_t> indices_with_drawers(const ImageDataset& ds, int lo, int hi) {
  MN_DATA_CHECK(ds.drawer.size() == ds.labels.size(), "indices_with_drawers: dataset has no drawers");
  std::vector<int64_t> out;
  for (size_t i = 0; i < ds.drawer.size(); ++i)
    if (ds.drawer[i] >= lo && ds.drawer[i] <= hi) out.push_back(static_cast<int64_t>(i));
  return out;
}

OmniglotSplits load_omniglot_splits(const OmniglotSplitOptions& opt) {
  MN_DATA_CHECK(opt.train_max_drawer >= 1 && opt.val_drawer_lo >= 1 &&
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
    MN_DATA_CHECK(opt.val_drawer_lo > opt.train_max_drawer,
             "omniglot splits: held-out validation drawers ", opt.val_drawer_lo, "..",
             opt.val_drawer_hi, " overlap the training drawers 1..", opt.train_max_drawer);
    s.val = subset(bg, indices_with_drawers(bg, opt.val_drawer_lo, opt.val_drawer_hi));
  }
  MN_DATA_CHECK(s.train.size() > 0 && s.val.size() > 0, "omniglot splits: empty split (train ",
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
