// Regression tests for the bad inputs of issues 17 and 37 (data readers): a directory
// or a FIFO where a file is expected, cache keys that missed changes, numbers
// that parsers accepted although non-finite or out of range, a wrong-size Lake
// image blamed on another file, and developer text in user-facing errors.
// Every test here failed (or hung, bounded by the FIFO watchdog) before its fix.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "data/csv.h"
#include "data/idx.h"
#include "data/image_io.h"
#include "data/lake_runs.h"
#include "data/omniglot.h"
#include "data/orl.h"
#include "data_test_util.h"

using namespace mn;
using namespace mn::data;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Runs `read` on a FIFO at `fifo`. A reader that blocks on the FIFO is freed by
// a watchdog after 3 s (it opens and closes the write end), so a regression
// fails this test instead of hanging the suite. Returns the error message ("" if
// nothing was thrown) and sets `seconds` to the time the read took.
std::string read_fifo(const std::string& fifo, const std::function<void()>& read, double* seconds) {
  EXPECT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << fifo;
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    const auto t0 = Clock::now();
    while (!done) {
      if (Clock::now() - t0 > std::chrono::seconds(3)) {
        // Non-blocking write end: succeeds only while a reader holds the FIFO.
        const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
        if (fd >= 0) ::close(fd);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::string msg;
  const auto t0 = Clock::now();
  try {
    read();
  } catch (const Error& e) {
    msg = e.what();
  }
  *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  done = true;
  watchdog.join();
  return msg;
}

#define EXPECT_REFUSES_FIFO(path, stmt)                                           \
  do {                                                                            \
    double sec = 0;                                                               \
    std::string m = read_fifo(path, [&] { stmt; }, &sec);                         \
    EXPECT_LT(sec, 2.0) << "blocked on the FIFO " << path;                        \
    EXPECT_NE(m.find("FIFO"), std::string::npos) << "message: " << m;             \
    EXPECT_NE(m.find(path), std::string::npos) << "message: " << m;               \
  } while (0)

void write_text(const std::string& path, const std::string& s) {
  std::ofstream f(path, std::ios::binary);
  f << s;
}

GrayImage flat(int h, int w, uint8_t v) {
  GrayImage g;
  g.height = h;
  g.width = w;
  g.pixels.assign(static_cast<size_t>(h) * w, v);
  return g;
}

// An Omniglot-shaped set of `n` characters x 2 drawers, `size`^2 1-bit images.
void make_set(const std::string& root, int n, int size) {
  for (int c = 0; c < n; ++c) {
    char dir[64];
    std::snprintf(dir, sizeof dir, "/Alpha/character%02d", c + 1);
    fs::create_directories(root + dir);
    for (int dr = 1; dr <= 2; ++dr) {
      GrayImage g = flat(size, size, 255);
      for (int i = 0; i < size * size; ++i)
        if ((i * (c + 3) + dr) % 5 == 0) g.pixels[i] = 0;
      char name[32];
      std::snprintf(name, sizeof name, "/%04d_%02d.png", c + 1, dr);
      write_png_gray(root + dir + name, g, true);
    }
  }
}

}  // namespace

// ---- a directory where a file is expected ------------------------------------

TEST(DataBadInput, DirectoryNamedLikeAFileIsAClearError) {
  test::TempDir d;
  for (const char* n : {"x.png", "x.pgm", "x-idx3-ubyte", "x.csv"}) fs::create_directories(d / n);
  EXPECT_MN_ERROR(read_gray_image(d / "x.png"), d / "x.png", "is a directory");
  EXPECT_MN_ERROR(read_gray_image(d / "x.pgm"), d / "x.pgm", "is a directory");
  EXPECT_MN_ERROR(read_idx(d / "x-idx3-ubyte"), d / "x-idx3-ubyte", "is a directory");
  EXPECT_MN_ERROR(read_csv(d / "x.csv"), d / "x.csv", "is a directory");
}

TEST(DataBadInput, DirectoryInsideOmniglotCharacterIsSkipped) {
  test::TempDir d;
  make_set(d / "set", 2, 6);
  fs::create_directories(d / "set/Alpha/character01/0009_03.png");
  OmniglotLoadOptions o;
  o.expected_size = 6;
  ImageDataset ds = load_omniglot_set(d / "set", o);  // skipped with a warning on stderr
  EXPECT_EQ(ds.size(), 4);
}

// Issue 37: a character (or alphabet) folder that is a symbolic link looping on
// itself or pointing nowhere is skipped with a line naming it, as files are.
TEST(DataBadInput, UnfollowableLinksAmongOmniglotFoldersAreSkippedByName) {
  test::TempDir d;
  make_set(d / "set", 2, 6);
  fs::create_symlink("character09", d / "set/Alpha/character09");        // loops on itself
  fs::create_symlink(d / "nowhere", d / "set/Alpha/character10");         // dangling
  fs::create_symlink(d / "nowhere_either", d / "set/Beta");               // a dangling alphabet
  OmniglotLoadOptions o;
  o.expected_size = 6;
  testing::internal::CaptureStderr();
  ImageDataset ds = load_omniglot_set(d / "set", o);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(ds.size(), 4);
  EXPECT_EQ(ds.num_classes(), 2);
  for (const char* link : {"set/Alpha/character09", "set/Alpha/character10", "set/Beta"})
    EXPECT_NE(err.find("omniglot: skipping '" + d / link + "': a symbolic link that cannot be followed"),
              std::string::npos) << link << ": " << err;
  EXPECT_NE(err.find("Too many levels of symbolic links"), std::string::npos) << err;
  EXPECT_NE(err.find("No such file or directory"), std::string::npos) << err;
}

TEST(DataBadInput, LakeRunsClassLabelsDirectoryIsAClearError) {
  test::TempDir d;
  fs::create_directories(d / "run01/class_labels.txt");
  EXPECT_MN_ERROR(load_lake_runs(d.path.string(), 1), "class_labels.txt", "is a directory");
}

// ---- a FIFO where a file is expected -------------------------------------------

TEST(DataBadInput, FifoIsRefusedWithoutBlocking) {
  test::TempDir d;
  EXPECT_REFUSES_FIFO(d / "x.png", read_gray_image(d / "x.png"));
  EXPECT_REFUSES_FIFO(d / "x.pgm", load_image_u8(d / "x.pgm"));
  EXPECT_REFUSES_FIFO(d / "lb-idx1-ubyte", read_idx(d / "lb-idx1-ubyte"));
  EXPECT_REFUSES_FIFO(d / "iris.csv", load_iris(d / "iris.csv"));
  fs::create_directories(d / "runs/run01");
  EXPECT_REFUSES_FIFO(d / "runs/run01/class_labels.txt", load_lake_runs(d / "runs", 1));
}

TEST(DataBadInput, FifoInsideOmniglotCharacterIsSkipped) {
  test::TempDir d;
  make_set(d / "set", 2, 6);
  double sec = 0;
  OmniglotLoadOptions o;
  o.expected_size = 6;
  ImageDataset ds;
  std::string m = read_fifo(d / "set/Alpha/character02/0009_03.png",
                            [&] { ds = load_omniglot_set(d / "set", o); }, &sec);
  EXPECT_LT(sec, 2.0);
  EXPECT_EQ(m, "");
  EXPECT_EQ(ds.size(), 4);
}

// ---- the packed Omniglot cache ---------------------------------------------------

TEST(DataBadInput, CacheDetectsCorruptionBeyondFirst64KiB) {
  test::TempDir d;
  make_set(d / "set", 30, 105);  // 60 images x 1379 bytes packed: > 64 KiB
  OmniglotLoadOptions o;
  o.cache_dir = d / "cache";
  ImageDataset ref = load_omniglot_set(d / "set", o);
  ASSERT_EQ(omniglot_last_cache_action(), 2);
  fs::path pack;
  for (const auto& e : fs::directory_iterator(d / "cache")) pack = e.path();
  const auto size = fs::file_size(pack);
  ASSERT_GT(size, 70000u);
  {
    std::fstream f(pack, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 100));  // inside the last image's bits
    char c = 0;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(size - 100));
    c = static_cast<char>(c ^ 0x10);
    f.write(&c, 1);
  }
  ImageDataset again = load_omniglot_set(d / "set", o);
  EXPECT_EQ(omniglot_last_cache_action(), 2) << "the corrupted pack was used";
  EXPECT_EQ(again.images.to_vector<uint8_t>(), ref.images.to_vector<uint8_t>());
}

TEST(DataBadInput, CacheNoticesChangedImageWithSameSizeAndMtime) {
  test::TempDir d;
  make_set(d / "set", 2, 6);
  const std::string img = d / "set/Alpha/character01/0001_01.png";
  // A PGM under a .png name decodes by content; writing one of fixed length
  // lets the change keep the file's size.
  write_pgm(img, flat(6, 6, 0));
  struct stat st0 {};
  ASSERT_EQ(::stat(img.c_str(), &st0), 0);
  OmniglotLoadOptions o;
  o.cache_dir = d / "cache";
  o.expected_size = 6;
  ImageDataset a = load_omniglot_set(d / "set", o);
  EXPECT_EQ(a.images.select(0, 0).contiguous().to_vector<uint8_t>()[0], 0);
  write_pgm(img, flat(6, 6, 255));
  const struct timespec times[2] = {st0.st_atim, st0.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, img.c_str(), times, 0), 0);
  struct stat st1 {};
  ASSERT_EQ(::stat(img.c_str(), &st1), 0);
  ASSERT_EQ(st1.st_size, st0.st_size);
  ImageDataset b = load_omniglot_set(d / "set", o);
  EXPECT_EQ(omniglot_last_cache_action(), 2) << "stale pack used for a changed image";
  EXPECT_EQ(b.images.select(0, 0).contiguous().to_vector<uint8_t>()[0], 255);
}

TEST(DataBadInput, SameFolderNameInTwoPlacesKeepsTwoCaches) {
  test::TempDir d;
  make_set(d / "a/images_evaluation", 2, 6);
  make_set(d / "b/images_evaluation", 3, 6);
  OmniglotLoadOptions o;
  o.cache_dir = d / "cache";
  o.expected_size = 6;
  EXPECT_EQ(load_omniglot_set(d / "a/images_evaluation", o).size(), 4);
  EXPECT_EQ(load_omniglot_set(d / "b/images_evaluation", o).size(), 6);
  EXPECT_EQ(load_omniglot_set(d / "a/images_evaluation/", o).size(), 4);
  EXPECT_EQ(omniglot_last_cache_action(), 1) << "a's pack was replaced by b's";
  EXPECT_EQ(load_omniglot_set(d / "b/images_evaluation", o).size(), 6);
  EXPECT_EQ(omniglot_last_cache_action(), 1);
}

// ---- numbers out of range ----------------------------------------------------------

TEST(DataBadInput, IdxLabelOutOfRangeIsRefused) {
  test::TempDir d;
  write_idx(d / "im", 2051, {3, 2, 2}, std::vector<uint8_t>(12, 7));
  write_idx(d / "lb", 2049, {3}, {1, 200, 3});
  EXPECT_MN_ERROR(load_idx_pair(d / "im", d / "lb"), d / "lb", "label 200");
}

// Issue 37: an image file whose header counts 0 images (or 0-pixel images) is
// refused by name instead of giving an empty data set.
TEST(DataBadInput, IdxWithNoImagesIsRefusedNamingTheFile) {
  test::TempDir d;
  write_idx(d / "im0", 2051, {0, 28, 28}, {});
  write_idx(d / "lb0", 2049, {0}, {});
  EXPECT_MN_ERROR(load_idx_pair(d / "im0", d / "lb0"), d / "im0", "holds no images");
  write_idx(d / "im_flat", 2051, {3, 0, 28}, {});
  write_idx(d / "lb3", 2049, {3}, {1, 2, 3});
  EXPECT_MN_ERROR(load_idx_pair(d / "im_flat", d / "lb3"), d / "im_flat", "3 images of 0x28");
}

TEST(DataBadInput, CsvNonFiniteOutOfRangeAndEmptyFieldsAreRefused) {
  test::TempDir d;
  const std::string head = "a,b,species\n1,2,x\n";
  const char* bad[] = {"nan,1,y\n", "1,inf,y\n", "-INF,1,y\n", "1e39,1,y\n", "1,2,\n", "0x10,1,y\n"};
  for (const char* row : bad) {
    SCOPED_TRACE(row);
    write_text(d / "t.csv", head + row);
    EXPECT_MN_ERROR(load_iris(d / "t.csv"), d / "t.csv", "data row 2");
  }
  write_text(d / "t.csv", head + "1.5e-3, -2 ,y\n");
  TabularDataset ok = load_iris(d / "t.csv");
  EXPECT_EQ(ok.labels, (std::vector<int32_t>{0, 1}));
  EXPECT_FLOAT_EQ(ok.features.to_vector<float>()[2], 1.5e-3f);
}

TEST(DataBadInput, HugeNumbersInFileNamesAreRefusedNotOverflowed) {
  test::TempDir d;
  make_set(d / "set", 1, 6);
  write_png_gray(d / "set/Alpha/character01/0001_99999999999999999999999.png", flat(6, 6, 0), true);
  EXPECT_MN_ERROR(load_omniglot_set(d / "set"), "0001_99999999999999999999999.png", "<drawer>");
}

TEST(DataBadInput, PgmHeaderWithHugeNumberIsRefused) {
  const std::string p5 = "P5 99999999999999999999 2 255\n";
  EXPECT_MN_ERROR(decode_pgm(reinterpret_cast<const uint8_t*>(p5.data()), p5.size(), "h.pgm"),
                  "h.pgm", "too large");
}

// ---- Lake's runs: the wrong-size image is the one named ----------------------------

TEST(DataBadInput, LakeWrongSizeImageIsTheOneNamed) {
  test::TempDir d;
  fs::create_directories(d / "run01/training");
  fs::create_directories(d / "run01/test");
  std::ofstream lab(d / "run01/class_labels.txt");
  for (int k = 1; k <= 3; ++k) {
    char q[64], c[64];
    std::snprintf(q, sizeof q, "run01/test/item%02d.png", k);
    std::snprintf(c, sizeof c, "run01/training/class%02d.png", k);
    // The first candidate in sorted order is the odd one out.
    write_png_gray(d / c, flat(k == 1 ? 7 : 6, 6, 255), true);
    write_png_gray(d / q, flat(6, 6, 255), true);
    lab << q << " " << c << "\n";
  }
  lab.close();
  try {
    load_lake_runs(d.path.string(), 1);
    ADD_FAILURE() << "expected an error for the 7x6 image";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(d / "run01/training/class01.png"), std::string::npos) << m;
    EXPECT_EQ(m.find("class02"), std::string::npos) << m;
    EXPECT_NE(m.find("7x6"), std::string::npos) << m;
  }
}

// ---- errors speak to the user --------------------------------------------------------

TEST(DataBadInput, ErrorsCarryNoDeveloperText) {
  test::TempDir d;
  write_text(d / "t.csv", "a,b\n1,2\n3\n");
  write_idx(d / "lb", 1234, {1}, {0});
  const std::function<void()> calls[] = {
      [&] { load_omniglot_set(d / "none"); }, [&] { read_csv(d / "t.csv"); },
      [&] { read_idx(d / "lb"); },            [&] { load_lake_runs(d / "none"); },
      [&] { load_orl_faces(d / "none"); },    [&] { load_mnist_family(d / "none"); },
      [&] { read_gray_image(d / "none.png"); }};
  for (const auto& call : calls) {
    try {
      call();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find("check `"), std::string::npos) << e.what();
    }
  }
}
