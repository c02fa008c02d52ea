// IDX reader (gzip via zlib), MNIST-family loading (KMNIST partial training
// images), held-out-class splits.
#include "data/idx.h"
#include "data/file_io.h"

#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>

#include "data/image_io.h"

namespace fs = std::filesystem;

namespace mn::data {

std::vector<uint8_t> read_maybe_gz(const std::string& path) {
  return gunzip_if_gzip(read_regular_file(path, "read_idx"), path);
}

std::vector<uint8_t> gunzip_if_gzip(std::vector<uint8_t> raw, const std::string& path) {
  if (raw.size() < 2 || raw[0] != 0x1f || raw[1] != 0x8b) return raw;
  z_stream zs{};
  MN_DATA_CHECK(inflateInit2(&zs, 15 + 32) == Z_OK, "read_idx: '", path, "': zlib init failed");
  std::vector<uint8_t> out;
  out.resize(raw.size() * 4 + 1024);
  zs.next_in = raw.data();
  MN_DATA_CHECK(raw.size() <= UINT32_MAX, "read_idx: '", path,
                "' is larger than 4 GiB compressed: not an IDX file this reader takes");
  zs.avail_in = static_cast<uInt>(raw.size());
  int rc = Z_OK;
  while (true) {
    if (zs.total_out == out.size()) out.resize(out.size() * 2);
    zs.next_out = out.data() + zs.total_out;
    zs.avail_out = static_cast<uInt>(out.size() - zs.total_out);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;  // input ended before the stream did
    if (rc != Z_OK && rc != Z_BUF_ERROR) break;
  }
  const uLong total = zs.total_out;
  const std::string zmsg = rc == Z_BUF_ERROR ? "stream ended early" : (zs.msg ? zs.msg : "error");
  inflateEnd(&zs);
  MN_DATA_CHECK(rc == Z_STREAM_END, "read_idx: '", path, "': truncated or corrupt gzip data (zlib: ",
           zmsg, ")");
  out.resize(total);
  return out;
}

IdxArray read_idx(const std::string& path) { return parse_idx(read_maybe_gz(path), path); }

IdxArray parse_idx(const std::vector<uint8_t>& b, const std::string& path) {
  MN_DATA_CHECK(b.size() >= 4, "read_idx: '", path, "': truncated header (", b.size(), " bytes)");
  const uint32_t magic = (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
  MN_DATA_CHECK(magic == 2049 || magic == 2051, "read_idx: '", path, "': wrong magic number ", magic,
           " (expected 2049 for labels or 2051 for images)");
  const size_t nd = b[3];
  MN_DATA_CHECK(b.size() >= 4 + 4 * nd, "read_idx: '", path, "': truncated header");
  IdxArray a;
  a.magic = magic;
  size_t count = 1;
  for (size_t d = 0; d < nd; ++d) {
    const uint8_t* p = b.data() + 4 + 4 * d;
    const int64_t v = (int64_t(p[0]) << 24) | (int64_t(p[1]) << 16) | (int64_t(p[2]) << 8) | p[3];
    a.dims.push_back(v);
    // A hostile header could make the product wrap around to the file size and
    // pass the size check below, so refuse a product that overflows.
    MN_DATA_CHECK(v == 0 || count <= std::numeric_limits<size_t>::max() / static_cast<size_t>(v),
             "read_idx: '", path, "': header dimensions overflow at dimension ", d, " (", v,
             "): they promise more data than any file holds");
    count *= static_cast<size_t>(v);
  }
  const size_t have = b.size() - 4 - 4 * nd;
  MN_DATA_CHECK(have >= count, "read_idx: '", path, "': truncated data: header promises ", count,
           " bytes, file holds ", have);
  MN_DATA_CHECK(have == count, "read_idx: '", path, "': ", have - count,
           " unexpected bytes after the data (header promises ", count, ")");
  a.data.assign(b.begin() + static_cast<std::ptrdiff_t>(4 + 4 * nd), b.end());
  return a;
}

ImageDataset load_idx_pair(const std::string& images_path, const std::string& labels_path,
                           bool allow_label_prefix, bool verbose) {
  IdxArray im = read_idx(images_path);
  IdxArray lb = read_idx(labels_path);
  MN_DATA_CHECK(im.magic == 2051 && im.dims.size() == 3, "load_idx: '", images_path,
           "' is not an image file (magic ", im.magic, ", ", im.dims.size(), " dims)");
  MN_DATA_CHECK(lb.magic == 2049 && lb.dims.size() == 1, "load_idx: '", labels_path,
           "' is not a label file (magic ", lb.magic, ", ", lb.dims.size(), " dims)");
  const int64_t n = im.dims[0], nl = lb.dims[0];
  // A header count of 0 (or 0-pixel images) would give an empty split that
  // later steps refuse far from the file, or not at all.
  MN_DATA_CHECK(n > 0 && im.dims[1] > 0 && im.dims[2] > 0, "load_idx: '", images_path, "' holds no images: ",
                "its header says ", n, " images of ", im.dims[1], "x", im.dims[2],
                " pixels (an empty or damaged file); give a complete IDX image file");
  ImageDataset ds;
  if (n != nl) {
    MN_DATA_CHECK(allow_label_prefix && n < nl, "load_idx: '", images_path, "' holds ", n,
             " images but '", labels_path, "' holds ", nl, " labels");
    ds.note = detail::str("'", images_path, "' holds ", n, " images, fewer than the ", nl,
                          " labels of '", labels_path, "': using the first ", n, " labels");
    if (verbose) std::cerr << "load_idx: " << ds.note << "\n";
  }
  ds.images = Tensor::from_host(im.data.data(), {n, im.dims[1], im.dims[2]}, DType::U8);
  // The MNIST family (MNIST, Fashion-MNIST, KMNIST) has ten classes, 0..9. A
  // label byte outside that range means a damaged or foreign label file. (The
  // old check compared a uint8 with 256 and could never fail.)
  constexpr int32_t kClasses = 10;
  ds.labels.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t l = lb.data[static_cast<size_t>(i)];
    MN_DATA_CHECK(l < kClasses, "load_idx: '", labels_path, "': label ", l, " at index ", i,
                  " is outside 0..", kClasses - 1,
                  " (damaged file, or not an MNIST-family label file)");
    ds.labels.push_back(l);
  }
  for (int32_t c = 0; c < kClasses; ++c) ds.class_names.push_back(std::to_string(c));
  return ds;
}

namespace {
std::string find_file(const std::string& dir, const std::string& stem) {
  for (const char* ext : {".gz", ""}) {
    std::string p = (fs::path(dir) / (stem + ext)).string();
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p;
  }
  return "";
}
}  // namespace

MnistFamily load_mnist_family(const std::string& dir, bool verbose) {
  std::error_code ec;
  MN_DATA_CHECK(fs::is_directory(dir, ec), "load_mnist_family: missing folder '", dir,
                "' (fetch it with data/fetch.sh get mnist|fashion-mnist|kmnist, or set MN_DATA_DIR)");
  MnistFamily f;
  auto need = [&](const std::string& stem) {
    std::string p = find_file(dir, stem);
    MN_DATA_CHECK(!p.empty(), "load_mnist_family: '", dir, "' lacks ", stem, "(.gz)");
    return p;
  };
  std::string tr_im = find_file(dir, "train-images-idx3-ubyte");
  bool partial = false;
  if (tr_im.empty() && fs::is_directory(fs::path(dir) / "partial", ec)) {
    for (const auto& e : list_dir(fs::path(dir) / "partial", "load_mnist_family")) {
      std::string n = e.path().filename().string();
      if (n.rfind("train-images-first", 0) == 0 && regular_file_or_warn(e, "load_mnist_family"))
        tr_im = e.path().string();
    }
    partial = !tr_im.empty();
  }
  MN_DATA_CHECK(!tr_im.empty(), "load_mnist_family: '", dir, "' lacks train-images-idx3-ubyte(.gz)");
  f.train = load_idx_pair(tr_im, need("train-labels-idx1-ubyte"), partial, verbose);
  f.test = load_idx_pair(need("t10k-images-idx3-ubyte"), need("t10k-labels-idx1-ubyte"), false, verbose);
  return f;
}

HeldOutSplit held_out_class_split(const ImageDataset& train, const ImageDataset& test,
                                  const std::vector<int32_t>& held_out) {
  HeldOutSplit s;
  s.train = indices_with_labels(train.labels, held_out, false);
  for (int64_t i = 0; i < test.size(); ++i) s.test10.push_back(i);
  s.test9 = indices_with_labels(test.labels, held_out, false);
  return s;
}

void write_idx(const std::string& path, uint32_t magic, const std::vector<int64_t>& dims,
               const std::vector<uint8_t>& data) {
  std::ofstream f(path, std::ios::binary);
  MN_DATA_CHECK(f.good(), "write_idx: cannot create '", path, "'");
  auto u32 = [&](uint32_t v) {
    char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    f.write(b, 4);
  };
  u32(magic);
  for (int64_t d : dims) u32(static_cast<uint32_t>(d));
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

}  // namespace mn::data
