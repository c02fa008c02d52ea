// IDX (plain and gzip), KMNIST-style label prefix, held-out-class and
// stratified splits, CSV/Iris, ORL faces; bad input; real files when present.
#include <gtest/gtest.h>

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "data/csv.h"
#include "data/idx.h"
#include "data/image_io.h"
#include "data/orl.h"
#include "data_test_util.h"

using namespace mn;
using namespace mn::data;
namespace fs = std::filesystem;

namespace {
void gzip_file(const std::string& src, const std::string& dst, size_t keep = SIZE_MAX) {
  std::vector<uint8_t> b = read_file_bytes(src);
  gzFile g = gzopen(dst.c_str(), "wb");
  gzwrite(g, b.data(), static_cast<unsigned>(b.size()));
  gzclose(g);
  if (keep != SIZE_MAX) fs::resize_file(dst, keep);
}
std::vector<uint8_t> seq(size_t n, int mul) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * mul);
  return v;
}
}  // namespace

TEST(DataIdx, PlainGzipAndLabelPrefix) {
  test::TempDir d;
  auto px = seq(5 * 3 * 2, 7);
  write_idx(d / "im", 2051, {5, 3, 2}, px);
  write_idx(d / "lb", 2049, {5}, {3, 1, 4, 1, 5});
  gzip_file(d / "im", d / "im.gz");
  IdxArray a = read_idx(d / "im.gz");
  EXPECT_EQ(a.dims, (std::vector<int64_t>{5, 3, 2}));
  EXPECT_EQ(a.data, px);
  ImageDataset ds = load_idx_pair(d / "im.gz", d / "lb");
  EXPECT_EQ(ds.labels, (std::vector<int32_t>{3, 1, 4, 1, 5}));
  EXPECT_EQ(ds.images.to_vector<uint8_t>(), px);
  EXPECT_TRUE(ds.note.empty());
  // 3 images, 5 labels: refused unless the prefix is allowed, then noted.
  write_idx(d / "im3", 2051, {3, 3, 2}, seq(18, 3));
  EXPECT_MN_ERROR(load_idx_pair(d / "im3", d / "lb"), "3 images", "5 labels");
  ImageDataset p = load_idx_pair(d / "im3", d / "lb", true);
  EXPECT_EQ(p.labels, (std::vector<int32_t>{3, 1, 4}));
  EXPECT_NE(p.note.find("first 3 labels"), std::string::npos) << p.note;
}

TEST(DataIdx, BadInput) {
  test::TempDir d;
  write_idx(d / "bad_magic", 2050, {2}, {1, 2});
  EXPECT_MN_ERROR(read_idx(d / "bad_magic"), "bad_magic", "wrong magic number 2050");
  write_idx(d / "short", 2051, {4, 3, 3}, seq(30, 1));  // 36 promised
  EXPECT_MN_ERROR(read_idx(d / "short"), "short", "truncated data");
  write_idx(d / "long", 2049, {2}, {1, 2, 3});
  EXPECT_MN_ERROR(read_idx(d / "long"), "long", "unexpected bytes");
  write_idx(d / "ok", 2051, {40, 10, 10}, seq(4000, 13));
  gzip_file(d / "ok", d / "cut.gz", 200);  // gzip stream cut short
  EXPECT_MN_ERROR(read_idx(d / "cut.gz"), "cut.gz", "truncated or corrupt gzip");
  EXPECT_MN_ERROR(read_idx(d / "none.gz"), "none.gz", "cannot open");
  // Dimensions whose product wraps around 2^64 to the data size (here 0 bytes)
  // must not pass the size check (they would later be read as 2^66 pixels).
  write_idx(d / "wrap", 2051, {int64_t(1) << 31, int64_t(1) << 31, 4}, {});
  EXPECT_MN_ERROR(read_idx(d / "wrap"), "wrap", "promise more data");
}

TEST(DataSplits, StratifiedAndHeldOut) {
  std::vector<int32_t> labels;
  for (int c = 0; c < 10; ++c)
    for (int k = 0; k < 100 + c; ++k) labels.push_back(c);
  Generator g(1);
  auto sub = stratified_subset(labels, 0.1, g);
  std::map<int, int> cnt;
  for (auto i : sub) cnt[labels[i]]++;
  for (int c = 0; c < 10; ++c) EXPECT_EQ(cnt[c], static_cast<int>(std::llround(0.1 * (100 + c))));
  Generator g2(1);
  EXPECT_EQ(stratified_subset(labels, 0.1, g2), sub);  // reproducible
  Generator g3(2);
  auto one = stratified_subset(labels, 0.01, g3);
  EXPECT_EQ(one.size(), 10u);  // 1 % of ~100 per class = 1 each
  Generator g4(5);
  IndexSplit s = stratified_split(labels, 0.7, 0.15, 0.15, g4);
  EXPECT_EQ(s.train.size() + s.val.size() + s.test.size(), labels.size());
  std::vector<int> seen(labels.size(), 0);
  for (auto* v : {&s.train, &s.val, &s.test})
    for (auto i : *v) seen[i]++;
  for (int x : seen) EXPECT_EQ(x, 1);  // a partition
  std::map<int, int> vc;
  for (auto i : s.val) vc[labels[i]]++;
  for (int c = 0; c < 10; ++c) EXPECT_EQ(vc[c], (100 + c) * 15 / 100);

  ImageDataset tr, te;
  tr.labels = {0, 1, 2, 0, 9};
  te.labels = {0, 5, 0, 3};
  HeldOutSplit h = held_out_class_split(tr, te, {0});
  EXPECT_EQ(h.train, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(h.test10.size(), 4u);
  EXPECT_EQ(h.test9, (std::vector<int64_t>{1, 3}));
}

TEST(DataCsv, IrisFixtureAndBadRows) {
  test::TempDir d;
  {
    std::ofstream f(d / "iris.csv");
    f << "a,b,species\n1.5,2,x\n3,4.25,y\n\n5,6,x\n";
  }
  TabularDataset t = load_iris(d / "iris.csv");
  EXPECT_EQ(t.features.to_vector<float>(), (std::vector<float>{1.5f, 2, 3, 4.25f, 5, 6}));
  EXPECT_EQ(t.labels, (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(t.class_names, (std::vector<std::string>{"x", "y"}));
  {
    std::ofstream f(d / "bad.csv");
    f << "a,b,species\n1,2,x\n3,y\n";
  }
  EXPECT_MN_ERROR(load_iris(d / "bad.csv"), "bad.csv' line 3", "wrong number of fields");
  {
    std::ofstream f(d / "nan.csv");
    f << "a,b,species\n1,zz,x\n";
  }
  EXPECT_MN_ERROR(load_iris(d / "nan.csv"), "nan.csv", "not a number");
}

TEST(DataCsv, RealIris) {
  MN_SKIP_IF_NO_DATA(p, "iris/iris.csv");
  TabularDataset t = load_iris(p);
  EXPECT_EQ(t.features.size(0), 150);
  EXPECT_EQ(t.features.size(1), 4);
  EXPECT_EQ(t.class_names.size(), 3u);
  Generator g(0);
  IndexSplit s = stratified_split(t.labels, 0.6, 0.2, 0.2, g);
  EXPECT_EQ(s.train.size(), 90u);
  EXPECT_EQ(s.val.size(), 30u);
  EXPECT_EQ(s.test.size(), 30u);
}

TEST(DataOrl, FixtureAndBadInput) {
  test::TempDir d;
  EXPECT_MN_ERROR(load_orl_faces(d / "missing"), "missing", "missing folder");
  for (int s : {2, 10, 1}) {
    fs::create_directories(d / ("s" + std::to_string(s)));
    for (int k : {10, 2, 1}) {
      GrayImage g;
      g.height = 3;
      g.width = 2;
      g.pixels.assign(6, static_cast<uint8_t>(s * 20 + k));
      write_pgm(d / ("s" + std::to_string(s) + "/" + std::to_string(k) + ".pgm"), g);
    }
  }
  ImageDataset ds = load_orl_faces(d.path.string());
  EXPECT_EQ(ds.class_names, (std::vector<std::string>{"s1", "s2", "s10"}));  // numeric order
  EXPECT_EQ(ds.files[2], "s1/10.pgm");
  EXPECT_EQ(ds.images.data<uint8_t>()[0], 21);
  GrayImage big;
  big.height = big.width = 4;
  big.pixels.assign(16, 0);
  write_pgm(d / "s2/3.pgm", big);
  EXPECT_MN_ERROR(load_orl_faces(d.path.string()), "3.pgm", "wrong image size");
}

TEST(DataOrl, RealOrl) {
  MN_SKIP_IF_NO_DATA(p, "orl_faces");
  ImageDataset ds = load_orl_faces(p);
  EXPECT_EQ(ds.size(), 400);
  EXPECT_EQ(ds.num_classes(), 40);
  EXPECT_EQ(ds.height(), 112);
  EXPECT_EQ(ds.width(), 92);
}

TEST(DataIdx, RealMnistFamily) {
  MN_SKIP_IF_NO_DATA(mn_dir, "mnist");
  MnistFamily m = load_mnist_family(mn_dir);
  EXPECT_EQ(m.train.size(), 60000);
  EXPECT_EQ(m.test.size(), 10000);
  EXPECT_EQ(m.train.height(), 28);
  const std::string km = test::data_path("kmnist");
  if (km.empty()) GTEST_SKIP() << "kmnist absent: skipped";
  MnistFamily k = load_mnist_family(km);
  EXPECT_EQ(k.train.size(), 7011);
  EXPECT_NE(k.train.note.find("first 7011 labels"), std::string::npos) << k.train.note;
  HeldOutSplit h = held_out_class_split(m.train, m.test, {0});
  EXPECT_EQ(h.test10.size(), 10000u);
  EXPECT_EQ(h.test9.size(), 10000u - 980u);  // MNIST test has 980 zeros
}
