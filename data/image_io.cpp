// Image decoding (stb_image for PNG; our own PGM parser for P2/P5), a minimal
// PNG writer (zlib) for fixtures, and uint8 -> float conversion. See image_io.h
// for the pixel convention.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
// PNG for the studies; JPEG and BMP only for a user's image folder (decode_image,
// data/image_folder.h). Our own parser reads PGM (P2/P5). Other loaders of Debian's
// stb_image failed under fuzz/fuzz_png (2026-11-26, inputs kept in fuzz/corpus/png):
// the PNM loader read past its buffer on a 16-bit colour PPM asked for one channel
// (ASan; PNM stays off), the JPEG loader wrote past a Huffman table when a DHT
// segment's counts sum to more than 256 (UBSan): check_jpeg_segments() refuses such
// a file before stb_image sees it. decode_gray_image() (the studies' reader) still
// refuses anything that is neither PNG nor PGM by name.
// stb_image calls memcpy(NULL, src, 0) for a PNG whose first IDAT chunk is
// empty (legal PNG; found by fuzz/fuzz_png under UBSan: a null argument to
// memcpy is undefined behaviour even for 0 bytes). Debian's stb_image.h is not
// ours to patch, so its memcpy calls go through a wrapper that skips empty copies.
#include <cstring>
namespace {
inline void* mn_stb_memcpy(void* dst, const void* src, size_t n) {
  return n == 0 ? dst : std::memcpy(dst, src, n);
}
}  // namespace
#define memcpy(d, s, n) mn_stb_memcpy(d, s, n)
#if __has_include(<stb_image.h>)
#include <stb_image.h>
#else
#include <stb/stb_image.h>
#endif
#undef memcpy

#include "data/image_io.h"
#include "data/image_folder.h"
#include "data/file_io.h"

#include <zlib.h>

#include <cctype>
#include <cerrno>
#include <type_traits>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace mn::data {

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  return read_regular_file(path, "read_file");
}

namespace {

bool is_pgm(const uint8_t* b, size_t n) {
  return n >= 2 && b[0] == 'P' && (b[1] == '2' || b[1] == '5');
}

// PGM header token reader: skips whitespace and '#' comments.
struct PgmReader {
  const uint8_t* b;
  size_t n;
  size_t pos;
  const std::string& name;
  void skip() {
    while (pos < n) {
      if (b[pos] == '#') {
        while (pos < n && b[pos] != '\n') ++pos;
      } else if (std::isspace(static_cast<unsigned char>(b[pos]))) {
        ++pos;
      } else {
        break;
      }
    }
  }
  long number(const char* what) {
    skip();
    MN_DATA_CHECK(pos < n && std::isdigit(static_cast<unsigned char>(b[pos])), "decode_pgm: '", name, "': truncated or malformed ",
             what);
    long v = 0;
    while (pos < n && std::isdigit(static_cast<unsigned char>(b[pos]))) {
      v = v * 10 + (b[pos] - '0');
      MN_DATA_CHECK(v < (1L << 30), "decode_pgm: '", name, "': ", what, " too large");
      ++pos;
    }
    return v;
  }
};

}  // namespace

GrayImage decode_pgm(const uint8_t* bytes, size_t n, const std::string& name) {
  MN_DATA_CHECK(is_pgm(bytes, n), "decode_pgm: '", name, "' is not a PGM file (magic P2/P5 missing)");
  const bool ascii = bytes[1] == '2';
  PgmReader r{bytes, n, 2, name};
  long w = r.number("width");
  long h = r.number("height");
  long maxval = r.number("maxval");
  MN_DATA_CHECK(w > 0 && h > 0 && maxval > 0 && maxval <= 65535, "decode_pgm: '", name,
           "': bad header (width ", w, ", height ", h, ", maxval ", maxval, ")");
  GrayImage img;
  img.height = static_cast<int>(h);
  img.width = static_cast<int>(w);
  const size_t count = static_cast<size_t>(w) * static_cast<size_t>(h);
  // Every pixel takes at least one byte of the file (P5) or one digit (P2):
  // refuse a header promising more before allocating w * h bytes for it.
  MN_DATA_CHECK(count <= n - r.pos, "decode_pgm: '", name, "': header promises ", w, "x", h,
           " pixels but only ", n - r.pos, " bytes follow (truncated or corrupt)");
  MN_DATA_CHECK(w * h <= kMaxImagePixels, "decode_pgm: '", name, "': ", w, "x", h,
                " pixels is more than the ", kMaxImagePixels, " this reader accepts");
  img.pixels.resize(count);
  auto scale = [maxval](long v) -> uint8_t {
    if (maxval == 255) return static_cast<uint8_t>(v);
    return static_cast<uint8_t>((v * 255 + maxval / 2) / maxval);
  };
  if (ascii) {
    for (size_t i = 0; i < count; ++i) {
      long v = r.number("pixel data");
      MN_DATA_CHECK(v <= maxval, "decode_pgm: '", name, "': pixel ", i, " = ", v, " exceeds maxval ",
               maxval);
      img.pixels[i] = scale(v);
    }
    return img;
  }
  // P5: exactly one whitespace byte after maxval, then raw samples.
  MN_DATA_CHECK(r.pos < n && std::isspace(static_cast<unsigned char>(bytes[r.pos])), "decode_pgm: '", name,
           "': truncated header");
  ++r.pos;
  const size_t bps = maxval < 256 ? 1 : 2;
  MN_DATA_CHECK(n - r.pos >= count * bps, "decode_pgm: '", name, "': truncated pixel data (",
           n - r.pos, " bytes, expected ", count * bps, " for ", w, "x", h, ")");
  const uint8_t* p = bytes + r.pos;
  for (size_t i = 0; i < count; ++i) {
    long v = bps == 1 ? p[i] : (static_cast<long>(p[2 * i]) << 8) | p[2 * i + 1];
    MN_DATA_CHECK(v <= maxval, "decode_pgm: '", name, "': pixel ", i, " exceeds maxval");
    img.pixels[i] = scale(v);
  }
  return img;
}

namespace {
bool is_png(const uint8_t* b, size_t n) {
  static const uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return n >= 8 && std::memcmp(b, kSig, 8) == 0;
}

// stb_image grows its buffer to a chunk's declared length before it reads the chunk,
// so an 82-byte PNG that declares a 2 GiB IDAT chunk made it allocate 2 GiB (found by
// fuzz/fuzz_png, 2026-11-26). Every chunk up to IEND must fit in the file: length,
// type, data and CRC.
void check_png_chunks(const uint8_t* b, size_t n, const std::string& name) {
  size_t off = 8;
  while (n - off >= 8) {  // a chunk's length and type are there: the rest must be too
    const uint64_t len = (uint64_t(b[off]) << 24) | (uint64_t(b[off + 1]) << 16) | (uint64_t(b[off + 2]) << 8) |
                         uint64_t(b[off + 3]);
    const std::string type(reinterpret_cast<const char*>(b + off + 4), 4);
    MN_DATA_CHECK(len + 12 <= n - off, "decode_image: '", name, "': corrupt or truncated PNG (chunk '", type,
                  "' at byte ", off, " declares ", len, " bytes of data and a 4-byte CRC, the file has ", n - off - 8,
                  " bytes left)");
    off += 12 + static_cast<size_t>(len);
    if (type == "IEND") break;
  }
}
}  // namespace

GrayImage decode_gray_image(const uint8_t* bytes, size_t n, const std::string& name) {
  MN_DATA_CHECK(n > 0, "decode_image: '", name, "' is empty (0 bytes): replace it with the image");
  if (is_pgm(bytes, n)) return decode_pgm(bytes, n, name);
  MN_DATA_CHECK(n <= static_cast<size_t>(INT32_MAX), "decode_image: '", name,
                "' is larger than 2 GiB: not an image this library reads");
  MN_DATA_CHECK(is_png(bytes, n), "decode_image: '", name,
                "' is neither a PNG nor a PGM (P2/P5) image, the two formats this reader decodes");
  check_png_chunks(bytes, n, name);
  int w = 0, h = 0, comp = 0;
  // Refuse absurd sizes from the header before stb allocates for them: a
  // 100-byte file may claim 16384 x 16384 pixels (found by fuzzing).
  if (stbi_info_from_memory(bytes, static_cast<int>(n), &w, &h, &comp) == 1) {
    MN_DATA_CHECK(static_cast<int64_t>(w) * h <= kMaxImagePixels, "decode_image: '", name,
                  "': ", w, "x", h, " pixels is more than the ", kMaxImagePixels,
                  " this reader accepts (corrupt header, or resize the image)");
  }
  // Request one channel: stb converts colour to gray and expands low bit depths
  // (1-bit gray becomes 0/255).
  stbi_uc* px = stbi_load_from_memory(bytes, static_cast<int>(n), &w, &h, &comp, 1);
  if (px == nullptr) {
    MN_THROW("decode_image: '", name, "': corrupt or truncated image (stb_image: ",
             stbi_failure_reason() ? stbi_failure_reason() : "unknown", ")");
  }
  GrayImage img;
  img.height = h;
  img.width = w;
  img.pixels.assign(px, px + static_cast<size_t>(w) * static_cast<size_t>(h));
  stbi_image_free(px);
  return img;
}

namespace {
bool is_jpeg(const uint8_t* b, size_t n) { return n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }
bool is_bmp(const uint8_t* b, size_t n) { return n >= 2 && b[0] == 'B' && b[1] == 'M'; }

// Walks a JPEG's marker segments, over every scan's entropy-coded data, and checks every
// Huffman table (DHT; a progressive JPEG has some between its scans): its 16 code counts
// must sum to at most 256 symbols, all inside the segment (Debian's stb_image writes past
// its table otherwise; see the top).
void check_jpeg_segments(const uint8_t* b, size_t n, const std::string& name) {
  size_t off = 2;
  while (off + 4 <= n) {
    MN_DATA_CHECK(b[off] == 0xFF, "decode_image: '", name, "': corrupt JPEG (no marker at byte ", off, ")");
    const uint8_t marker = b[off + 1];
    if (marker == 0xFF) {  // fill byte
      ++off;
      continue;
    }
    if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {  // no length
      off += 2;
      continue;
    }
    if (marker == 0xD9) return;  // end of image
    const size_t len = (size_t(b[off + 2]) << 8) | b[off + 3];
    MN_DATA_CHECK(len >= 2 && off + 2 + len <= n, "decode_image: '", name, "': corrupt or truncated JPEG (segment ",
                  int(marker), " at byte ", off, " declares ", len, " bytes)");
    if (marker == 0xC4) {
      size_t p = off + 4;
      const size_t end = off + 2 + len;
      while (p < end) {
        MN_DATA_CHECK(p + 17 <= end, "decode_image: '", name, "': corrupt JPEG (a Huffman table is cut short)");
        size_t symbols = 0;
        for (int i = 1; i <= 16; ++i) symbols += b[p + i];
        MN_DATA_CHECK(symbols <= 256 && p + 17 + symbols <= end, "decode_image: '", name,
                      "': corrupt JPEG (a Huffman table declares ", symbols, " symbols; at most 256 fit)");
        p += 17 + symbols;
      }
    }
    off += 2 + len;
    if (marker == 0xDA) {  // a scan: its entropy-coded data runs to the next marker that is not
      // a stuffed 0xFF00 or a restart marker (a progressive JPEG has more tables after it)
      while (off + 1 < n && !(b[off] == 0xFF && b[off + 1] != 0x00 && (b[off + 1] < 0xD0 || b[off + 1] > 0xD7)))
        ++off;
    }
  }
}
}  // namespace

DecodedImage decode_image(const uint8_t* bytes, size_t n, int channels, const std::string& name) {
  MN_DATA_CHECK(channels == 1 || channels == 3, "decode_image: '", name, "': channels must be 1 or 3, not ", channels);
  MN_DATA_CHECK(n > 0, "decode_image: '", name, "' is empty (0 bytes): replace it with the image or remove it");
  DecodedImage out;
  if (is_pgm(bytes, n)) {
    GrayImage g = decode_pgm(bytes, n, name);
    out.height = g.height, out.width = g.width, out.channels = channels;
    out.pixels.resize(g.pixels.size() * size_t(channels));
    for (size_t i = 0; i < g.pixels.size(); ++i)
      for (int c = 0; c < channels; ++c) out.pixels[i * size_t(channels) + size_t(c)] = g.pixels[i];
    return out;
  }
  MN_DATA_CHECK(n <= static_cast<size_t>(INT32_MAX), "decode_image: '", name,
                "' is larger than 2 GiB: not an image this library reads");
  const bool png = is_png(bytes, n), jpeg = is_jpeg(bytes, n), bmp = is_bmp(bytes, n);
  MN_DATA_CHECK(png || jpeg || bmp, "decode_image: '", name,
                "' is not a PNG, JPEG, BMP or PGM image (by its first bytes): convert it or remove it");
  if (png) check_png_chunks(bytes, n, name);
  if (jpeg) check_jpeg_segments(bytes, n, name);
  int w = 0, h = 0, comp = 0;
  if (stbi_info_from_memory(bytes, static_cast<int>(n), &w, &h, &comp) == 1) {
    MN_DATA_CHECK(static_cast<int64_t>(w) * h <= kMaxImagePixels, "decode_image: '", name, "': ", w, "x", h,
                  " pixels is more than the ", kMaxImagePixels, " this reader accepts (corrupt header, or resize the "
                  "image)");
  }
  stbi_uc* px = stbi_load_from_memory(bytes, static_cast<int>(n), &w, &h, &comp, channels);
  if (px == nullptr) {
    MN_THROW("decode_image: '", name, "': corrupt or truncated image (stb_image: ",
             stbi_failure_reason() ? stbi_failure_reason() : "unknown", ")");
  }
  out.height = h, out.width = w, out.channels = channels;
  out.pixels.assign(px, px + size_t(w) * size_t(h) * size_t(channels));
  stbi_image_free(px);
  return out;
}

GrayImage read_gray_image(const std::string& path) {
  std::vector<uint8_t> bytes = read_regular_file(path, "read_image");
  return decode_gray_image(bytes.data(), bytes.size(), path);
}

Tensor load_image_u8(const std::string& path, int expected_h, int expected_w) {
  GrayImage img = read_gray_image(path);
  if (expected_h > 0 || expected_w > 0) {
    MN_DATA_CHECK((expected_h <= 0 || img.height == expected_h) &&
                 (expected_w <= 0 || img.width == expected_w),
             "load_image: '", path, "': wrong image size ", img.height, "x", img.width,
             " (H x W), expected ", expected_h, "x", expected_w);
  }
  return Tensor::from_host(img.pixels.data(), {img.height, img.width}, DType::U8);
}

Tensor to_float(const Tensor& u8, FloatMode mode, DType dtype) {
  MN_DATA_CHECK(u8.dtype() == DType::U8, "to_float: expected uint8, got ", u8.desc());
  MN_DATA_CHECK(u8.is_cpu(), "to_float: expected a CPU tensor, got ", u8.desc());
  MN_DATA_CHECK(is_floating(dtype), "to_float: target dtype must be floating");
  Tensor src = u8.contiguous();
  Tensor out = Tensor::empty(src.shape(), dtype);
  const uint8_t* s = src.data<uint8_t>();
  const int64_t n = src.numel();
  auto run = [&](auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    for (int64_t i = 0; i < n; ++i) {
      T v = static_cast<T>(s[i]) / T(255);
      o[i] = mode == FloatMode::Ink01 ? T(1) - v : v;
    }
  };
  if (dtype == DType::F32) run(out.data<float>());
  else run(out.data<double>());
  return out;
}

void write_pgm(const std::string& path, const GrayImage& img) {
  std::ofstream f(path, std::ios::binary);
  MN_DATA_CHECK(f.good(), "write_pgm: cannot create '", path, "'");
  f << "P5\n" << img.width << " " << img.height << "\n255\n";
  f.write(reinterpret_cast<const char*>(img.pixels.data()),
          static_cast<std::streamsize>(img.pixels.size()));
  MN_DATA_CHECK(f.good(), "write_pgm: write error on '", path, "'");
}

namespace {
void put_u32(std::vector<uint8_t>& v, uint32_t x) {
  v.push_back(static_cast<uint8_t>(x >> 24));
  v.push_back(static_cast<uint8_t>(x >> 16));
  v.push_back(static_cast<uint8_t>(x >> 8));
  v.push_back(static_cast<uint8_t>(x));
}
void put_chunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  uLong crc = crc32(0L, out.data() + start, static_cast<uInt>(out.size() - start));
  put_u32(out, static_cast<uint32_t>(crc));
}
}  // namespace

void write_png_gray(const std::string& path, const GrayImage& img, bool one_bit) {
  MN_DATA_CHECK(img.width > 0 && img.height > 0 &&
               img.pixels.size() == static_cast<size_t>(img.width) * img.height,
           "write_png: '", path, "': bad image buffer");
  const size_t row_bytes = one_bit ? (static_cast<size_t>(img.width) + 7) / 8 : img.width;
  std::vector<uint8_t> raw;
  raw.reserve((row_bytes + 1) * img.height);
  for (int y = 0; y < img.height; ++y) {
    raw.push_back(0);  // filter: none
    const uint8_t* row = img.pixels.data() + static_cast<size_t>(y) * img.width;
    if (!one_bit) {
      raw.insert(raw.end(), row, row + img.width);
    } else {
      for (size_t b = 0; b < row_bytes; ++b) {
        uint8_t byte = 0;
        for (int k = 0; k < 8; ++k) {
          size_t x = b * 8 + k;
          if (x < static_cast<size_t>(img.width) && row[x] >= 128) byte |= 0x80 >> k;
        }
        raw.push_back(byte);
      }
    }
  }
  uLongf zlen = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> z(zlen);
  MN_DATA_CHECK(compress(z.data(), &zlen, raw.data(), static_cast<uLong>(raw.size())) == Z_OK,
           "write_png: '", path, "': zlib compress failed");
  z.resize(zlen);
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  put_u32(ihdr, static_cast<uint32_t>(img.width));
  put_u32(ihdr, static_cast<uint32_t>(img.height));
  ihdr.push_back(one_bit ? 1 : 8);  // bit depth
  ihdr.push_back(0);                // colour type: gray
  ihdr.push_back(0);
  ihdr.push_back(0);
  ihdr.push_back(0);
  put_chunk(out, "IHDR", ihdr);
  put_chunk(out, "IDAT", z);
  put_chunk(out, "IEND", {});
  std::ofstream f(path, std::ios::binary);
  MN_DATA_CHECK(f.good(), "write_png: cannot create '", path, "'");
  f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  MN_DATA_CHECK(f.good(), "write_png: write error on '", path, "'");
}

}  // namespace mn::data
