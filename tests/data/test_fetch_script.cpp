// data/fetch.sh on a local fixture: MN_FETCH_BASE_URL points the "download" at
// a file:// folder the test creates, with its own checksum file. Checks that a
// verified download is installed, that a checksum mismatch or a missing file
// installs nothing (no partial data, no staging left), and that locate skips an
// incomplete copy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/wait.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "data/idx.h"
#include "data/image_io.h"
#include "data_test_util.h"

namespace fs = std::filesystem;
using namespace mn;

namespace {
const char* kFiles[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};

void gz(const std::string& path, const std::string& content) {
  gzFile g = gzopen(path.c_str(), "wb");
  gzwrite(g, content.data(), static_cast<unsigned>(content.size()));
  gzclose(g);
}

// Runs cmd with its output captured in a file of its own (never in the working folder).
int run(const std::string& cmd, std::string* out) {
  char path[] = "/tmp/mn_fetch_out_XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) return -1;
  ::close(fd);
  std::string full = cmd + " > " + path + " 2>&1";
  int rc = std::system(full.c_str());
  std::ifstream f(path);
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  ::unlink(path);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

bool have_tools() { return std::system("command -v curl >/dev/null && command -v sha256sum >/dev/null") == 0; }
}  // namespace

TEST(DataFetchScript, DownloadsVerifiesAndNeverInstallsPartialData) {
  if (!have_tools()) GTEST_SKIP() << "curl or sha256sum missing: fetch.sh test skipped";
  test::TempDir d;
  const std::string script = std::string(MN_SOURCE_DIR) + "/data/fetch.sh";
  fs::create_directories(d / "server/mnist");
  fs::create_directories(d / "server/fashion-mnist");
  fs::create_directories(d / "work");
  struct Cwd {  // restored even when an assertion returns early
    fs::path old = fs::current_path();
    ~Cwd() { fs::current_path(old); }
  } cwd_guard;
  fs::current_path(d.path / "work");  // ./datasets and ../shared/datasets resolve inside the fixture
  std::string sums;
  for (const char* f : kFiles) {
    const std::string content = std::string("fixture ") + f;
    gz(d / ("server/mnist/" + std::string(f)), content);
    gz(d / ("server/fashion-mnist/" + std::string(f)), content);
    std::vector<uint8_t> b = data::read_file_bytes(d / ("server/mnist/" + std::string(f)));
    // Compute the expected SHA-256 with the system tool into the sums file.
    std::string o;
    ASSERT_EQ(run("sha256sum '" + (d / ("server/mnist/" + std::string(f))) + "'", &o), 0);
    sums += o.substr(0, 64) + "  mnist/" + f + "\n";
    sums += o.substr(0, 64) + "  fashion-mnist/" + f + "\n";
  }
  // Corrupt one fashion-mnist file on the "server": its checksum will not match.
  gz(d / "server/fashion-mnist/t10k-labels-idx1-ubyte.gz", "tampered");
  {
    std::ofstream f(d / "sums");
    f << sums;
  }
  // `env -u`: the caller's MN_DATA_DIR / DATA_DIR (often exported on a
  // developer's machine) must not decide what the script finds here.
  const std::string env = "env -u MN_DATA_DIR -u DATA_DIR DATA_DIR='" + (d / "none") + "' MN_DATA_DIR= MN_FETCH_SUMS='" + (d / "sums") +
                          "' MN_FETCH_DEST='" + (d / "dest") + "' MN_FETCH_BASE_URL='file://" +
                          d.path.string() + "/server' ";
  std::string out;
  EXPECT_EQ(run(env + "bash '" + script + "' locate mnist", &out), 1) << out;
  EXPECT_EQ(run(env + "bash '" + script + "' get mnist", &out), 0) << out;
  for (const char* f : kFiles) EXPECT_TRUE(fs::exists(d / ("dest/mnist/" + std::string(f)))) << f;

  EXPECT_NE(run(env + "bash '" + script + "' get fashion-mnist", &out), 0) << out;
  EXPECT_NE(out.find("checksum mismatch"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(d / "dest/fashion-mnist"));
  for (const auto& e : fs::directory_iterator(d / "dest"))
    EXPECT_EQ(e.path().filename().string().rfind(".staging", 0), std::string::npos) << e.path();

  // A file missing on the server: nothing installed either.
  fs::remove(d / "server/fashion-mnist/t10k-labels-idx1-ubyte.gz");
  EXPECT_NE(run(env + "bash '" + script + "' get fashion-mnist", &out), 0) << out;
  EXPECT_FALSE(fs::exists(d / "dest/fashion-mnist"));

  // The installed copy is found and verifies; an incomplete copy is not used.
  const std::string env2 = "env -u MN_DATA_DIR -u DATA_DIR DATA_DIR='" + (d / "dest") + "' MN_FETCH_SUMS='" + (d / "sums") + "' ";
  EXPECT_EQ(run(env2 + "bash '" + script + "' locate mnist", &out), 0) << out;
  EXPECT_NE(out.find("dest/mnist"), std::string::npos) << out;
  EXPECT_EQ(run(env2 + "bash '" + script + "' verify mnist", &out), 0) << out;
  fs::remove(d / "dest/mnist/t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(run(env2 + "bash '" + script + "' locate mnist", &out), 1) << out;
  EXPECT_NE(out.find("incomplete"), std::string::npos) << out;
}

// The search order is the C++ loader's and the README's: $MN_DATA_DIR first,
// then $DATA_DIR (data/fetch.sh had them the other way round).
TEST(DataFetchScript, SearchesMnDataDirBeforeDataDir) {
  test::TempDir d;
  const std::string script = std::string(MN_SOURCE_DIR) + "/data/fetch.sh";
  for (const char* base : {"mn", "plain"}) {
    fs::create_directories(d / (std::string(base) + "/iris"));
    std::ofstream(d / (std::string(base) + "/iris/iris.csv")) << "a,species\n1,x\n";
  }
  std::string out;
  ASSERT_EQ(run("env -u MN_DATA_DIR -u DATA_DIR MN_DATA_DIR='" + (d / "mn") + "' DATA_DIR='" +
                    (d / "plain") + "' bash '" + script + "' locate iris",
                &out),
            0)
      << out;
  EXPECT_NE(out.find(d / "mn/iris"), std::string::npos) << out;
  EXPECT_EQ(out.find(d / "plain/iris"), std::string::npos) << out;
}
