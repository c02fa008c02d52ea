// data/image_folder.h: a user's folder of class folders -- formats (PNG, JPEG, BMP,
// PGM; grey and RGB), the box resize, the layout errors naming the file, the
// content-keyed cache, the class split.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "data/image_folder.h"
#include "data/image_io.h"
#include "tests/common/image_folder_fixture.h"
#include "tests/data/data_test_util.h"

// stb_image_write makes the test's JPEG and BMP files. It is a tool of the test, not code
// under test, and its JPEG encoder shifts negative values (UBSan in .ci/run's sanitizer
// stage): clang compiles it without the undefined-behaviour checks.
#define STB_IMAGE_WRITE_IMPLEMENTATION
#if defined(__clang__)
#pragma clang attribute push(__attribute__((no_sanitize("undefined"))), apply_to = function)
#endif
#if __has_include(<stb_image_write.h>)
#include <stb_image_write.h>
#else
#include <stb/stb_image_write.h>
#endif
#if defined(__clang__)
#pragma clang attribute pop
#endif

namespace {
using namespace mn;
using namespace mn::data;
namespace fs = std::filesystem;

// A w x h image of one colour in `channels` channels, written by stb_image_write.
void write_solid(const std::string& path, int w, int h, int channels, const std::vector<uint8_t>& rgb) {
  std::vector<uint8_t> px(size_t(w) * size_t(h) * size_t(channels));
  for (size_t i = 0; i < px.size(); ++i) px[i] = rgb[i % size_t(channels)];
  fs::create_directories(fs::path(path).parent_path());
  const std::string ext = fs::path(path).extension().string();
  int ok = 0;
  if (ext == ".jpg") ok = stbi_write_jpg(path.c_str(), w, h, channels, px.data(), 95);
  else if (ext == ".bmp") ok = stbi_write_bmp(path.c_str(), w, h, channels, px.data());
  else ok = stbi_write_png(path.c_str(), w, h, channels, px.data(), w * channels);
  ASSERT_NE(ok, 0) << path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ImageFolder, ReadsPngJpegBmpPgmAsGreyOrRgb) {
  test::TempDir d;
  write_solid(d / "b_jpg/1.jpg", 20, 10, 3, {200, 100, 50});
  write_solid(d / "b_jpg/2.JPG", 8, 8, 3, {200, 100, 50});  // extensions in any case
  write_solid(d / "c_bmp/1.bmp", 5, 7, 3, {200, 100, 50});
  write_solid(d / "a_png/1.png", 3, 3, 1, {90});
  GrayImage g;
  g.height = g.width = 6;
  g.pixels.assign(36, 40);
  fs::create_directories(d / "d_pgm");
  write_pgm(d / "d_pgm/1.pgm", g);
  std::ofstream(d / ".DS_Store") << "x";     // hidden and system files are skipped
  std::ofstream(d / "c_bmp/Thumbs.db") << "x";
  for (int channels : {1, 3}) {
    SCOPED_TRACE(channels);
    FolderLoadOptions o;
    o.channels = channels;
    o.image_size = 4;
    const FolderDataset ds = load_image_folder(d.path.string(), o);
    EXPECT_EQ(ds.class_names, (std::vector<std::string>{"a_png", "b_jpg", "c_bmp", "d_pgm"}));
    EXPECT_EQ(ds.files, (std::vector<std::string>{"a_png/1.png", "b_jpg/1.jpg", "b_jpg/2.JPG", "c_bmp/1.bmp",
                                                  "d_pgm/1.pgm"}));
    EXPECT_EQ(ds.labels, (std::vector<int32_t>{0, 1, 1, 2, 3}));
    ASSERT_EQ(ds.images.shape(), (Shape{5, channels, 4, 4}));
    const uint8_t* p = ds.images.data<uint8_t>();
    auto px = [&](int img, int c) { return int(p[((img * channels + c) * 4 + 2) * 4 + 1]); };
    EXPECT_EQ(px(0, 0), 90);
    EXPECT_EQ(px(4, channels - 1), 40);  // grey PGM repeated in every channel
    const int luma = int(std::lround(0.299 * 200 + 0.587 * 100 + 0.114 * 50));
    for (int img : {1, 2, 3}) {
      if (channels == 3) {
        EXPECT_NEAR(px(img, 0), 200, img == 3 ? 0 : 4) << img;  // JPEG is lossy
        EXPECT_NEAR(px(img, 1), 100, img == 3 ? 0 : 4) << img;
        EXPECT_NEAR(px(img, 2), 50, img == 3 ? 0 : 4) << img;
      } else {
        EXPECT_NEAR(px(img, 0), luma, img == 3 ? 1 : 4) << img;
      }
    }
  }
}

TEST(ImageFolder, BoxResizeAveragesDownAndRepeatsUp) {
  DecodedImage img;
  img.height = 1, img.width = 3, img.channels = 1;
  img.pixels = {0, 30, 60};
  // 3 -> 2 columns: output 0 covers [0, 1.5): (0 * 1 + 30 * 0.5) / 1.5 = 10; output 1 covers [1.5, 3): 50.
  // Rows 1 -> 2: each output row is the one input row.
  EXPECT_EQ(resize_box_planar(img, 2), (std::vector<uint8_t>{10, 50, 10, 50}));
  img.height = 2, img.width = 2;
  img.pixels = {10, 20, 30, 40};
  EXPECT_EQ(resize_box_planar(img, 1), (std::vector<uint8_t>{25}));
  EXPECT_EQ(resize_box_planar(img, 4), (std::vector<uint8_t>{10, 10, 20, 20, 10, 10, 20, 20, 30, 30, 40, 40, 30, 30,
                                                             40, 40}));
  img.channels = 2;  // interleaved (H, W, C) in, planes out
  img.height = 1, img.width = 2;
  img.pixels = {1, 100, 3, 200};
  EXPECT_EQ(resize_box_planar(img, 1), (std::vector<uint8_t>{2, 150}));
}

TEST(ImageFolder, RefusesBadLayoutsNamingTheFile) {
  FolderLoadOptions o;
  o.image_size = 8;
  {
    test::TempDir d;
    test::make_image_folder(d.path.string(), 2, 2, 8);
    std::ofstream(d / "class10/notes.txt") << "x";
    const std::string e = error_of([&] { load_image_folder(d.path.string(), o); });
    EXPECT_NE(e.find("notes.txt"), std::string::npos) << e;
    EXPECT_NE(e.find("not an image"), std::string::npos) << e;
  }
  {
    test::TempDir d;
    test::make_image_folder(d.path.string(), 2, 2, 8);
    fs::create_directories(d / "empty");
    const std::string e = error_of([&] { load_image_folder(d.path.string(), o); });
    EXPECT_NE(e.find("'empty' holds no images"), std::string::npos) << e;
  }
  {
    test::TempDir d;
    test::make_image_folder(d.path.string(), 2, 2, 8);
    fs::create_directories(d / "class10/deeper");
    EXPECT_NE(error_of([&] { load_image_folder(d.path.string(), o); }).find("deeper"), std::string::npos);
  }
  {
    test::TempDir d;
    test::make_image_folder(d.path.string(), 2, 2, 8);
    write_solid(d / "loose.png", 2, 2, 1, {1});
    const std::string e = error_of([&] { load_image_folder(d.path.string(), o); });
    EXPECT_NE(e.find("'loose.png' lies directly in the folder beside class folders"), std::string::npos) << e;
  }
  {
    test::TempDir d;
    test::make_image_folder(d.path.string(), 2, 2, 8);
    std::ofstream(d / "class11/1.png", std::ios::trunc) << "not a png at all";
    const std::string e = error_of([&] { load_image_folder(d.path.string(), o); });
    EXPECT_NE(e.find("class11/1.png"), std::string::npos) << e;
  }
  {
    test::TempDir d;
    EXPECT_NE(error_of([&] { load_image_folder(d / "missing", o); }).find("missing"), std::string::npos);
    EXPECT_NE(error_of([&] { load_image_folder(d.path.string(), o); }).find("no class folders"), std::string::npos);
  }
  // Images directly in the folder are an unlabelled set where that is asked for.
  test::TempDir d;
  write_solid(d / "x.png", 2, 2, 1, {7});
  o.allow_unlabelled = true;
  const FolderDataset ds = load_image_folder(d.path.string(), o);
  EXPECT_FALSE(ds.labelled());
  EXPECT_EQ(ds.labels, (std::vector<int32_t>{-1}));
}

// A JPEG whose Huffman table declares more than 256 symbols is refused before
// stb_image reads it (Debian's stb_image writes past its table on such a file).
TEST(ImageFolder, RefusesAJpegWithAnOversizedHuffmanTable) {
  std::vector<uint8_t> b{0xFF, 0xD8, 0xFF, 0xC4};
  const size_t len = 2 + 17 + 300;
  b.push_back(uint8_t(len >> 8)), b.push_back(uint8_t(len & 0xFF));
  b.push_back(0x00);                                   // class 0, table 0
  for (int i = 0; i < 16; ++i) b.push_back(i < 2 ? 150 : 0);  // 300 symbols declared
  b.resize(b.size() + 300, 1);
  b.push_back(0xFF), b.push_back(0xD9);
  const std::string e = error_of([&] { decode_image(b.data(), b.size(), 1, "bad.jpg"); });
  EXPECT_NE(e.find("bad.jpg"), std::string::npos) << e;
  EXPECT_NE(e.find("300 symbols"), std::string::npos) << e;
  // The same table after a first scan (as a progressive JPEG places them) is found too.
  std::vector<uint8_t> p{0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x04, 0x01, 0x00, 0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD0, 0x56};
  p.insert(p.end(), b.begin() + 2, b.end());
  const std::string e2 = error_of([&] { decode_image(p.data(), p.size(), 1, "progressive.jpg"); });
  EXPECT_NE(e2.find("300 symbols"), std::string::npos) << e2;
}

TEST(ImageFolder, CacheServesTheSameImagesAndFollowsTheirContent) {
  test::TempDir d, cache;
  test::make_image_folder(d.path.string(), 3, 2, 8);
  FolderLoadOptions o;
  o.image_size = 8;
  o.cache_dir = cache.path.string();
  const FolderDataset a = load_image_folder(d.path.string(), o);
  auto packs = [&] {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(cache.path)) n += e.path().extension() == ".mnpack";
    return n;
  };
  ASSERT_EQ(packs(), 1u);
  const FolderDataset b = load_image_folder(d.path.string(), o);  // from the pack
  EXPECT_EQ(b.files, a.files);
  EXPECT_EQ(b.labels, a.labels);
  EXPECT_EQ(b.class_names, a.class_names);
  EXPECT_EQ(b.images.to_double_vector(), a.images.to_double_vector());
  // A changed image makes a new key: the new pixels are read, not the old pack's.
  GrayImage g;
  g.height = g.width = 8;
  g.pixels.assign(64, 123);
  write_png_gray(d / "class10/0.png", g);
  const FolderDataset c = load_image_folder(d.path.string(), o);
  EXPECT_EQ(packs(), 2u);
  EXPECT_EQ(c.images.data<uint8_t>()[0], 123);
  // A damaged pack is rebuilt, never half-used.
  for (const auto& e : fs::directory_iterator(cache.path)) {
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  const FolderDataset e = load_image_folder(d.path.string(), o);
  EXPECT_EQ(e.images.to_double_vector(), c.images.to_double_vector());
}

TEST(ImageFolder, ClassSplitIsDisjointCompleteAndSeeded) {
  Generator g1(5), g2(5);
  const ClassSplit s = split_classes(20, 0.2, 0.25, g1), t = split_classes(20, 0.2, 0.25, g2);
  EXPECT_EQ(s.val.size(), 4u);
  EXPECT_EQ(s.test.size(), 5u);
  EXPECT_EQ(s.train.size(), 11u);
  std::set<int32_t> all(s.train.begin(), s.train.end());
  all.insert(s.val.begin(), s.val.end());
  all.insert(s.test.begin(), s.test.end());
  EXPECT_EQ(all.size(), 20u);
  EXPECT_EQ(s.val, t.val);
  Generator g3(5);
  EXPECT_EQ(split_classes(3, 0.1, 0.0, g3).val.size(), 1u);  // a fraction > 0 gives at least one class
  Generator g4(5);
  EXPECT_NE(error_of([&] { split_classes(3, 0.3, 0.3, g4); }).find("at least 2"), std::string::npos);

  test::TempDir d;
  test::make_image_folder(d.path.string(), 4, 3, 8);
  FolderLoadOptions o;
  o.image_size = 8;
  const FolderDataset ds = load_image_folder(d.path.string(), o);
  const FolderDataset sub = subset_classes(ds, {3, 1});
  EXPECT_EQ(sub.class_names, (std::vector<std::string>{"class13", "class11"}));
  EXPECT_EQ(sub.labels, (std::vector<int32_t>{1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(sub.files.front(), "class11/0.png");
  EXPECT_EQ(sub.images.size(0), 6);
}

}  // namespace
