// Image decoding into tensors: PNG (any bit depth, including Omniglot's 1-bit
// grayscale PNGs) through stb_image, and PGM (P2 ASCII / P5 binary, maxval up to
// 65535) through our own parser, since stb_image does not read P2.
//
// Pixel convention (everything in data/ follows it):
//   * uint8 tensors hold the file's gray levels unchanged: 0 = black, 255 = white.
//     Omniglot is black ink on white paper, so ink = 0 and paper = 255; 1-bit
//     PNGs are expanded to exactly {0, 255}. Colour images are converted to gray
//     by stb_image (ITU-R 601 luma); 16-bit samples are scaled to 0..255.
//   * Float tensors are produced by to_float() with an explicit mode:
//       FloatMode::Gray01 -> v / 255            (white = 1, black/ink = 0)
//       FloatMode::Ink01  -> 1 - v / 255        (ink = 1, paper = 0; the usual
//                                                 network input for Omniglot)
//     Both lie in [0, 1] (the "input normalisation to (0, 1)" option).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace mn::data {

// The largest image the decoders accept (64 Mpixel, e.g. 8192 x 8192): a
// corrupt header cannot make them allocate gigabytes.
constexpr int64_t kMaxImagePixels = int64_t(1) << 26;

// One gray image, row-major (H, W).
struct GrayImage {
  int height = 0;
  int width = 0;
  std::vector<uint8_t> pixels;  // (H, W)
};

// Decodes a PNG/PGM/any stb-supported file into gray uint8. Throws mn::Error
// naming the file and the problem (missing, unreadable, corrupt, truncated).
GrayImage read_gray_image(const std::string& path);
// Same, from bytes in memory; `name` is used in error messages only.
GrayImage decode_gray_image(const uint8_t* bytes, size_t n, const std::string& name);
// PGM only (P2 or P5).
GrayImage decode_pgm(const uint8_t* bytes, size_t n, const std::string& name);

// Reads a whole regular file into memory (throws naming the file when it cannot,
// or when it is a directory, FIFO or device; see data/file_io.h).
std::vector<uint8_t> read_file_bytes(const std::string& path);

// The image as a (H, W) uint8 CPU tensor. When expected_h/expected_w are > 0 the
// size is checked and a mismatch throws naming the file and both sizes.
Tensor load_image_u8(const std::string& path, int expected_h = -1, int expected_w = -1);

enum class FloatMode { Gray01, Ink01 };
// uint8 tensor of any shape (CPU) -> float32/float64 tensor of the same shape.
Tensor to_float(const Tensor& u8, FloatMode mode, DType dtype = DType::F32);

// Writes a gray image as binary PGM (P5); used by tests and tools to make fixtures.
void write_pgm(const std::string& path, const GrayImage& img);

}  // namespace mn::data

namespace mn::data {
// Writes a gray PNG of our own encoding (zlib): 8-bit, or 1-bit when `one_bit`
// (pixels < 128 -> 0, else 1, as Omniglot's files). For test fixtures and tools.
void write_png_gray(const std::string& path, const GrayImage& img, bool one_bit = false);
}  // namespace mn::data
