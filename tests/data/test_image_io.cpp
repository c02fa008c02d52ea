// Image decoding: PNG (1-bit and 8-bit, our writer decoded by stb), PGM P2/P5,
// float conversions, bad input; plus a real Omniglot and ORL file when present.
#include <gtest/gtest.h>

#include <fstream>

#include "data/image_io.h"
#include "data_test_util.h"

using namespace mn;
using namespace mn::data;

namespace {
GrayImage pattern(int h, int w, bool binary) {
  GrayImage g;
  g.height = h;
  g.width = w;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      g.pixels.push_back(binary ? (((x * 7 + y * 3) % 5) < 2 ? 0 : 255)
                                : static_cast<uint8_t>((x * 13 + y * 29) & 255));
  return g;
}
void write_text(const std::string& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}
}  // namespace

TEST(DataImageIO, Png8BitRoundTrip) {
  test::TempDir d;
  GrayImage g = pattern(7, 11, false);
  write_png_gray(d / "a.png", g);
  GrayImage r = read_gray_image(d / "a.png");
  EXPECT_EQ(r.height, 7);
  EXPECT_EQ(r.width, 11);
  EXPECT_EQ(r.pixels, g.pixels);
}

TEST(DataImageIO, Png1BitExpandsTo0And255) {
  test::TempDir d;
  GrayImage g = pattern(13, 10, true);  // width not a multiple of 8
  write_png_gray(d / "b.png", g, /*one_bit=*/true);
  Tensor t = load_image_u8(d / "b.png", 13, 10);
  ASSERT_EQ(t.dim(), 2);
  EXPECT_EQ(t.dtype(), DType::U8);
  EXPECT_EQ(t.to_vector<uint8_t>(), g.pixels);
}

TEST(DataImageIO, PgmP5AndP2) {
  test::TempDir d;
  GrayImage g = pattern(4, 5, false);
  write_pgm(d / "a.pgm", g);
  EXPECT_EQ(read_gray_image(d / "a.pgm").pixels, g.pixels);
  // ASCII with a comment and maxval 15: values scale to round(v * 255 / 15).
  write_text(d / "b.pgm", "P2\n# comment\n3 2\n15\n0 1 2\n13 14 15\n");
  GrayImage r = read_gray_image(d / "b.pgm");
  ASSERT_EQ(r.height, 2);
  ASSERT_EQ(r.width, 3);
  std::vector<int> v = {0, 1, 2, 13, 14, 15};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r.pixels[i], (v[i] * 255 + 7) / 15) << i;
  // 16-bit binary
  std::string p16 = "P5 2 1 65535\n";
  p16 += std::string("\xff\xff\x00\x00", 4);
  write_text(d / "c.pgm", p16);
  GrayImage r16 = read_gray_image(d / "c.pgm");
  EXPECT_EQ(r16.pixels, (std::vector<uint8_t>{255, 0}));
}

TEST(DataImageIO, FloatModes) {
  Tensor u = Tensor::from_vector<uint8_t>({0, 255, 51}, {1, 3});
  auto g = to_float(u, FloatMode::Gray01, DType::F64).to_vector<double>();
  auto k = to_float(u, FloatMode::Ink01, DType::F64).to_vector<double>();
  EXPECT_DOUBLE_EQ(g[0], 0.0);
  EXPECT_DOUBLE_EQ(g[1], 1.0);
  EXPECT_DOUBLE_EQ(g[2], 0.2);
  EXPECT_DOUBLE_EQ(k[0], 1.0);  // black ink -> 1
  EXPECT_DOUBLE_EQ(k[1], 0.0);
  EXPECT_NEAR(k[2], 0.8, 1e-15);
}

TEST(DataImageIO, BadInputNamesFileAndProblem) {
  test::TempDir d;
  EXPECT_MN_ERROR(read_gray_image(d / "missing.png"), "missing.png", "cannot open");
  write_png_gray(d / "ok.png", pattern(20, 20, false));
  std::vector<uint8_t> bytes = read_file_bytes(d / "ok.png");
  // Truncated: keep the header only.
  {
    std::ofstream f(d / "trunc.png", std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), 40);
  }
  EXPECT_MN_ERROR(read_gray_image(d / "trunc.png"), "trunc.png", "corrupt or truncated");
  // Corrupt: garbage bytes in the compressed stream.
  {
    std::vector<uint8_t> c = bytes;
    for (size_t i = 45; i < c.size() - 12; ++i) c[i] ^= 0x5a;
    std::ofstream f(d / "corrupt.png", std::ios::binary);
    f.write(reinterpret_cast<const char*>(c.data()), static_cast<std::streamsize>(c.size()));
  }
  EXPECT_MN_ERROR(read_gray_image(d / "corrupt.png"), "corrupt.png", "corrupt");
  write_text(d / "empty.png", "");
  EXPECT_MN_ERROR(read_gray_image(d / "empty.png"), "empty.png", "empty");
  write_text(d / "t.pgm", "P5 4 4 255\nabc");
  EXPECT_MN_ERROR(read_gray_image(d / "t.pgm"), "t.pgm", "truncated");
  // A huge header on a tiny file: an mn::Error, not an attempt to allocate 10^18 bytes.
  write_text(d / "huge.pgm", "P5 1000000000 1000000000 255\nabc");
  EXPECT_MN_ERROR(read_gray_image(d / "huge.pgm"), "huge.pgm", "truncated");
  write_text(d / "huge2.pgm", "P2 1000000000 1000000000 255\n1 2 3");
  EXPECT_MN_ERROR(read_gray_image(d / "huge2.pgm"), "huge2.pgm", "truncated");
  EXPECT_MN_ERROR(load_image_u8(d / "ok.png", 105, 105), "ok.png", "wrong image size");
  // A 16-bit colour PPM (P6, maxval 444): stb_image's PNM loader read past its buffer
  // on it (fuzz/fuzz_png under ASan); a JPEG whose Huffman table has more than 256
  // codes: its JPEG loader wrote past the table (UBSan). Both are refused by name now.
  write_text(d / "p6.ppm", std::string("P6\n2\n2\v444\v2", 12));
  EXPECT_MN_ERROR(read_gray_image(d / "p6.ppm"), "p6.ppm", "neither a PNG nor a PGM");
  const unsigned char jpg[27] = {0xff, 0xff, 0xff, 0xd8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                 0xc4, 0xff, 0xff, 0x00, 0x94, 0x08, 0x00, 0x00, 0x47, 0x02, 0x00, 0x29, 0x24};
  write_text(d / "dht.jpg", std::string(reinterpret_cast<const char*>(jpg), sizeof jpg));
  EXPECT_MN_ERROR(read_gray_image(d / "dht.jpg"), "dht.jpg", "neither a PNG nor a PGM");
  // An 8x8 PNG whose second chunk declares 1.2 GB: stb_image allocated 2 GiB for it
  // (fuzz/fuzz_png); every chunk must now fit in the file.
  {
    std::vector<uint8_t> c(bytes.begin(), bytes.begin() + 33);  // signature + IHDR
    const uint8_t idat[9] = {0x49, 0x48, 0x44, 0x41, 'I', 'D', 'A', 'T', 0};  // length, type, 1 byte (as the 2nd input)
    c.insert(c.end(), idat, idat + 9);
    std::ofstream f(d / "bigchunk.png", std::ios::binary);
    f.write(reinterpret_cast<const char*>(c.data()), static_cast<std::streamsize>(c.size()));
  }
  EXPECT_MN_ERROR(read_gray_image(d / "bigchunk.png"), "bigchunk.png", "corrupt or truncated PNG");
}

TEST(DataImageIO, RealOmniglotPngIsBinary105) {
  MN_SKIP_IF_NO_DATA(p, "omniglot/images_background/Alphabet_of_the_Magi/character01/0709_01.png");
  Tensor t = load_image_u8(p, 105, 105);
  int64_t ink = 0, paper = 0;
  for (uint8_t v : t.to_vector<uint8_t>()) {
    ASSERT_TRUE(v == 0 || v == 255) << int(v);
    (v == 0 ? ink : paper)++;
  }
  EXPECT_GT(ink, 0);
  EXPECT_GT(paper, ink);  // black ink on a white page: paper dominates
}

TEST(DataImageIO, RealOrlPgm) {
  MN_SKIP_IF_NO_DATA(p, "orl_faces/s1/1.pgm");
  Tensor t = load_image_u8(p, 112, 92);
  EXPECT_EQ(t.size(0), 112);
  EXPECT_EQ(t.size(1), 92);
}
