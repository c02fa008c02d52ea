// Omniglot index, packed cache (built once, reused, invalidated on change),
// splits, bad input on fixtures the test writes; the real set when present.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "data/image_io.h"
#include "data/omniglot.h"
#include "data_test_util.h"

using namespace mn;
using namespace mn::data;
namespace fs = std::filesystem;

// clang spells "built with AddressSanitizer" as a feature test, gcc as a macro.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MN_ASAN_BUILD 1
#endif
#endif
#ifndef MN_ASAN_BUILD
#define MN_ASAN_BUILD 0
#endif

namespace {
// A tiny Omniglot-shaped tree: alphabets A (2 characters) and B (1 character),
// drawers 1..3, 8x8 1-bit PNGs whose pixel pattern encodes (class, drawer).
GrayImage glyph(int cls, int drawer, int size = 8) {
  GrayImage g;
  g.height = g.width = size;
  for (int i = 0; i < size * size; ++i) g.pixels.push_back(((i * (cls + 2) + drawer) % 3) == 0 ? 0 : 255);
  return g;
}
void make_tree(const test::TempDir& d, const std::string& set, int size = 8) {
  const char* chars[3][2] = {{"A", "character01"}, {"A", "character02"}, {"B", "character01"}};
  for (int c = 0; c < 3; ++c) {
    std::string dir = d / (set + "/" + chars[c][0] + "/" + chars[c][1]);
    fs::create_directories(dir);
    for (int dr = 1; dr <= 3; ++dr) {
      char name[32];
      std::snprintf(name, sizeof name, "/%04d_%02d.png", 100 + c, dr);
      write_png_gray(dir + name, glyph(c, dr, size), true);
    }
  }
}
}  // namespace

TEST(DataOmniglot, IndexesFixtureTree) {
  test::TempDir d;
  make_tree(d, "images_background");
  OmniglotLoadOptions o;
  o.expected_size = 8;
  ImageDataset ds = load_omniglot_set(d / "images_background", o);
  ASSERT_EQ(ds.size(), 9);
  EXPECT_EQ(ds.num_classes(), 3);
  EXPECT_EQ(ds.alphabet_names, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(ds.class_names[2], "B/character01");
  EXPECT_EQ(ds.class_alphabet, (std::vector<int32_t>{0, 0, 1}));
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(ds.labels[i], i / 3);
    EXPECT_EQ(ds.drawer[i], i % 3 + 1);
    EXPECT_EQ(ds.images.select(0, i).contiguous().to_vector<uint8_t>(), glyph(i / 3, i % 3 + 1).pixels);
  }
  EXPECT_EQ(omniglot_last_cache_action(), 0);
}

TEST(DataOmniglot, CacheBuiltOnceReusedAndInvalidated) {
  test::TempDir d;
  make_tree(d, "images_background");
  OmniglotLoadOptions o;
  o.expected_size = 8;
  o.cache_dir = d / "cache";
  ImageDataset a = load_omniglot_set(d / "images_background", o);
  EXPECT_EQ(omniglot_last_cache_action(), 2);
  ImageDataset b = load_omniglot_set(d / "images_background", o);
  EXPECT_EQ(omniglot_last_cache_action(), 1);
  EXPECT_EQ(a.images.to_vector<uint8_t>(), b.images.to_vector<uint8_t>());
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.drawer, b.drawer);
  EXPECT_EQ(a.files, b.files);
  EXPECT_EQ(a.class_names, b.class_names);

  // Changing one file's content (and so its size/mtime) rebuilds the pack.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  GrayImage g = glyph(0, 1);
  for (auto& p : g.pixels) p = 255 - p;
  write_png_gray(d / "images_background/A/character01/0100_01.png", g, false);  // 8-bit now
  ImageDataset c = load_omniglot_set(d / "images_background", o);
  EXPECT_EQ(omniglot_last_cache_action(), 2);
  EXPECT_EQ(c.images.select(0, 0).contiguous().to_vector<uint8_t>(), g.pixels);
  load_omniglot_set(d / "images_background", o);
  EXPECT_EQ(omniglot_last_cache_action(), 1);

  // Removing a file rebuilds.
  fs::remove(d / "images_background/B/character01/0102_03.png");
  ImageDataset e = load_omniglot_set(d / "images_background", o);
  EXPECT_EQ(omniglot_last_cache_action(), 2);
  EXPECT_EQ(e.size(), 8);

  // A damaged pack is rebuilt, never half-used.
  // The pack is named after the folder and a hash of its absolute path.
  std::string pack;
  for (const auto& en : fs::directory_iterator(d / "cache")) pack = en.path().string();
  ASSERT_NE(pack.find("omniglot_images_background_"), std::string::npos) << pack;
  fs::resize_file(pack, fs::file_size(pack) - 5);
  ImageDataset f = load_omniglot_set(d / "images_background", o);
  EXPECT_EQ(omniglot_last_cache_action(), 2);
  EXPECT_EQ(f.images.to_vector<uint8_t>(), e.images.to_vector<uint8_t>());

  // A damaged image count (bytes 16..19, after magic and listing hash) is
  // rebuilt too, without first trying to allocate 2^32 labels and file names.
  {
    std::fstream pf(pack, std::ios::in | std::ios::out | std::ios::binary);
    pf.seekp(16);
    const char ff[4] = {'\xff', '\xff', '\xff', '\xff'};
    pf.write(ff, 4);
  }
  ImageDataset h = load_omniglot_set(d / "images_background", o);
  EXPECT_EQ(omniglot_last_cache_action(), 2);
  EXPECT_EQ(h.images.to_vector<uint8_t>(), e.images.to_vector<uint8_t>());
}

TEST(DataOmniglot, SplitsKochDrawersAndHeldOut) {
  test::TempDir d;
  make_tree(d, "images_background");
  fs::create_directories(d / "images_evaluation");
  fs::rename(d / "images_background/B", d / "images_evaluation/B");
  OmniglotSplitOptions o;
  o.root = d.path.string();
  // expected_size is 105 inside the splits loader; our fixture is 8x8, so use a
  // 105 fixture instead for this test.
  test::TempDir d2;
  make_tree(d2, "images_background", 105);
  fs::create_directories(d2 / "images_evaluation");
  fs::rename(d2 / "images_background/B", d2 / "images_evaluation/B");
  o.root = d2.path.string();
  o.train_max_drawer = 2;
  OmniglotSplits s = load_omniglot_splits(o);
  EXPECT_EQ(s.train.size(), 4);  // 2 characters x drawers 1..2
  EXPECT_EQ(s.train.num_classes(), 2);
  EXPECT_EQ(s.val.size(), 3);
  EXPECT_EQ(s.val.alphabet_names, (std::vector<std::string>{"B"}));
  for (int32_t dr : s.train.drawer) EXPECT_LE(dr, 2);
  o.validation = OmniglotValidation::HeldOutDrawers;
  o.val_drawer_lo = 3;
  o.val_drawer_hi = 3;
  s = load_omniglot_splits(o);
  EXPECT_EQ(s.val.size(), 2);
  for (int32_t dr : s.val.drawer) EXPECT_EQ(dr, 3);
  o.val_drawer_lo = 2;  // overlaps the training drawers
  EXPECT_MN_ERROR(load_omniglot_splits(o), "overlap", "training drawers");
}

TEST(DataOmniglot, BadInput) {
  test::TempDir d;
  OmniglotLoadOptions o;
  o.expected_size = 8;
  EXPECT_MN_ERROR(load_omniglot_set(d / "nope", o), "nope", "missing folder");
  make_tree(d, "s");
  fs::create_directories(d / "s/Empty_alphabet");
  EXPECT_MN_ERROR(load_omniglot_set(d / "s", o), "Empty_alphabet", "empty alphabet");
  fs::remove_all(d / "s/Empty_alphabet");
  fs::create_directories(d / "s/C/character01");
  EXPECT_MN_ERROR(load_omniglot_set(d / "s", o), "C/character01", "no PNG");
  write_png_gray(d / "s/C/character01/0200_01.png", glyph(0, 1, 9), true);
  EXPECT_MN_ERROR(load_omniglot_set(d / "s", o), "0200_01.png", "wrong image size");
  {
    std::ofstream f(d / "s/C/character01/0200_01.png", std::ios::binary);
    f << "\x89PNG\r\n\x1a\n garbage";
  }
  EXPECT_MN_ERROR(load_omniglot_set(d / "s", o), "0200_01.png", "corrupt or truncated");
  fs::remove(d / "s/C/character01/0200_01.png");
  write_png_gray(d / "s/C/character01/oops.png", glyph(0, 1), true);
  EXPECT_MN_ERROR(load_omniglot_set(d / "s", o), "oops.png", "<id>_<drawer>.png");
}

TEST(DataOmniglot, RealSetsCountsSplitsAndCachedLoadTime) {
  MN_SKIP_IF_NO_DATA(root, "omniglot/images_background");
  const std::string omni = test::data_path("omniglot");
  OmniglotLoadOptions o;
  o.cache_dir = std::string(MN_BINARY_DIR) + "/data_cache";
  ImageDataset bg = load_omniglot_set(root, o);  // builds the pack on first run
  EXPECT_EQ(bg.size(), 19280);
  EXPECT_EQ(bg.num_classes(), 964);
  EXPECT_EQ(bg.alphabet_names.size(), 30u);
  auto t0 = std::chrono::steady_clock::now();
  ImageDataset bg2 = load_omniglot_set(root, o);
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(omniglot_last_cache_action(), 1);
  std::printf("cached load of images_background (19,280 images): %.3f s\n", sec);
  // Target is <= 1 s; allow 3 s here because the test machine is shared. Not
  // in sanitizer builds (MN_SANITIZE): instrumented code is not timed.
#if defined(__SANITIZE_ADDRESS__) || MN_ASAN_BUILD
  std::printf("sanitizer build: load time not checked\n");
#else
  EXPECT_LT(sec, 3.0);
#endif
  EXPECT_EQ(bg.images.to_vector<uint8_t>(), bg2.images.to_vector<uint8_t>());
  for (auto& c : bg.indices_by_class()) EXPECT_EQ(c.size(), 20u);

  OmniglotSplitOptions so;
  so.root = omni;
  so.cache_dir = o.cache_dir;
  so.train_max_drawer = 12;
  OmniglotSplits s = load_omniglot_splits(so);
  std::printf("%s\n", s.description.c_str());
  EXPECT_EQ(s.train.size(), 964 * 12);
  EXPECT_EQ(s.val.size(), 5540);
  EXPECT_EQ(s.val.num_classes(), 277);
  EXPECT_EQ(s.val.alphabet_names.size(), 10u);
  // No validation alphabet in training.
  std::set<std::string> tr(s.train.alphabet_names.begin(), s.train.alphabet_names.end());
  for (auto& a : s.val.alphabet_names) EXPECT_EQ(tr.count(a), 0u) << a;
}
