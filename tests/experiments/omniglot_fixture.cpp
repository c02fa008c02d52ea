// Shared fixture of the experiments tests (see omniglot_fixture.h).
#include "tests/experiments/omniglot_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "data/image_io.h"
#include "nn/checkpoint.h"

namespace mn_test_exp {

// ---------------------------------------------------------------- fixture --
TempDir::TempDir(const std::string& tag) {
  std::random_device rd;
  path = fs::temp_directory_path() / ("mn_exp_test_" + tag + "_" + std::to_string(rd()) + std::to_string(rd()));
  fs::create_directories(path);
}
TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

namespace {

// A glyph: three strokes (segments) in pixel coordinates.
struct Glyph {
  double x0[3], y0[3], x1[3], y1[3];
};

Glyph make_glyph(uint64_t class_seed) {
  std::mt19937_64 g(class_seed * 2654435761ULL + 12345);
  std::uniform_real_distribution<double> u(18.0, 87.0);
  Glyph gl;
  for (int s = 0; s < 3; ++s) {
    gl.x0[s] = u(g), gl.y0[s] = u(g), gl.x1[s] = u(g), gl.y1[s] = u(g);
  }
  return gl;
}

// Renders `gl` with a per-drawer jitter of the end points (+-2 px) and a shift (+-3 px).
mn::data::GrayImage render(const Glyph& gl, uint64_t drawer_seed) {
  std::mt19937_64 g(drawer_seed * 11400714819323198485ULL + 7);
  std::uniform_real_distribution<double> jit(-2.0, 2.0), sh(-3.0, 3.0);
  const double dx = sh(g), dy = sh(g);
  double ax[3], ay[3], bx[3], by[3];
  for (int s = 0; s < 3; ++s) {
    ax[s] = gl.x0[s] + dx + jit(g), ay[s] = gl.y0[s] + dy + jit(g);
    bx[s] = gl.x1[s] + dx + jit(g), by[s] = gl.y1[s] + dy + jit(g);
  }
  mn::data::GrayImage img;
  img.height = img.width = kSize;
  img.pixels.assign(kSize * kSize, 255);  // white paper, black ink (Omniglot's convention)
  const double r2 = 3.0 * 3.0;            // stroke half-width 3 px
  for (int y = 0; y < kSize; ++y)
    for (int x = 0; x < kSize; ++x)
      for (int s = 0; s < 3; ++s) {
        double vx = bx[s] - ax[s], vy = by[s] - ay[s], wx = x - ax[s], wy = y - ay[s];
        double len2 = vx * vx + vy * vy;
        double t = len2 > 0 ? std::clamp((wx * vx + wy * vy) / len2, 0.0, 1.0) : 0.0;
        double ex = wx - t * vx, ey = wy - t * vy;
        if (ex * ex + ey * ey <= r2) {
          img.pixels[static_cast<size_t>(y) * kSize + x] = 0;
          break;
        }
      }
  return img;
}

void write_set(const fs::path& set_dir, const std::string& prefix, int alphabets, int chars, int drawers,
               uint64_t seed_base) {
  int img_id = 1;
  for (int a = 0; a < alphabets; ++a)
    for (int c = 0; c < chars; ++c) {
      char cname[32];
      std::snprintf(cname, sizeof cname, "character%02d", c + 1);
      fs::path dir = set_dir / (prefix + std::to_string(a + 1)) / cname;
      fs::create_directories(dir);
      const uint64_t cls_seed = seed_base + static_cast<uint64_t>(a * 100 + c);
      Glyph gl = make_glyph(cls_seed);
      for (int d = 1; d <= drawers; ++d) {
        char fname[32];
        std::snprintf(fname, sizeof fname, "%04d_%02d.png", img_id, d);
        mn::data::write_png_gray((dir / fname).string(), render(gl, cls_seed * 31 + d), /*one_bit=*/true);
      }
      ++img_id;
    }
}

// One synthetic Omniglot tree shared by every test of this file (written once).
}  // namespace

const std::string& omniglot_root() {
  static TempDir* dir = [] {
    auto* d = new TempDir("omniglot");  // intentionally leaked until exit: removed by atexit below
    write_set(d->path / "images_background", "Background_", 4, 6, 6, 1000);
    write_set(d->path / "images_evaluation", "Evaluation_", 2, 8, 6, 5000);
    std::atexit([] { delete dir; });
    return d;
  }();
  static const std::string root = dir->str();
  return root;
}

// ------------------------------------------------------------ run helpers --

RunResult run_study(StudyKind kind, std::vector<std::string> args, bool capture_stderr) {
  args.insert(args.begin(), kind == StudyKind::Triplet ? "omniglot_triplet" : "omniglot_siamese");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  RunResult r;
  if (capture_stderr) testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  r.rc = mn::exp::run_omniglot_study(kind, static_cast<int>(args.size()), argv.data());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (capture_stderr) r.err = testing::internal::GetCapturedStderr();
  return r;
}

// Flags every training test shares: the synthetic data, the CPU, a small net.
std::vector<std::string> base_args(const std::string& out_dir, const std::string& cache_dir) {
  return {"--data-dir", omniglot_root(), "--out-dir", out_dir, "--cache-dir", cache_dir, "--device", "cpu",
          "--preset", "full", "--width", "0.125", "--embedding", "32", "--val-way", "5", "--eval-batch", "64"};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string l;
  while (std::getline(in, l))
    if (!l.empty()) lines.push_back(l);
  return lines;
}

// The number after "key": in a flat JSON line (NaN when absent or null).
// (Compact `"key":1` as in metrics.jsonl, or `"key": 1` as in summary.json.)
double json_field(const std::string& line, const std::string& key) {
  size_t p = line.find("\"" + key + "\":");
  if (p == std::string::npos) return NAN;
  const char* s = line.c_str() + p + key.size() + 3;
  while (*s == ' ') ++s;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  return end == s ? NAN : v;
}

// The line with the given fields removed (for comparisons that ignore timings).
std::string without_fields(std::string line, const std::vector<std::string>& keys) {
  for (const auto& k : keys) {
    size_t p = line.find("\"" + k + "\":");
    if (p == std::string::npos) continue;
    size_t e = line.find_first_of(",}", p);
    if (e != std::string::npos && line[e] == ',') ++e;
    line.erase(p, e - p);
  }
  return line;
}

// ---------------------------------------------------------------- resume --
// Both runs end with the same weights, optimizer state, RNG states and metrics
// (timings aside).
void expect_same_run(const fs::path& a, const fs::path& b) {
  mn::nn::SafetensorsFile fa = mn::nn::read_safetensors((a / "last.safetensors").string());
  mn::nn::SafetensorsFile fb = mn::nn::read_safetensors((b / "last.safetensors").string());
  ASSERT_EQ(fa.tensors.size(), fb.tensors.size());
  for (const auto& [name, ta] : fa.tensors) {
    auto it = fb.tensors.find(name);
    ASSERT_NE(it, fb.tensors.end()) << name;
    ASSERT_EQ(ta.shape(), it->second.shape()) << name;
    ASSERT_EQ(ta.dtype(), it->second.dtype()) << name;
    EXPECT_EQ(0, std::memcmp(ta.contiguous().raw_data(), it->second.contiguous().raw_data(), ta.nbytes()))
        << "tensor " << name << " differs between the two runs";
  }
  // (A run without dropout, or with online batches, keeps no state for that stream.)
  for (const char* k : {"epoch", "rng.sample.offset", "rng.loader.offset", "rng.dropout.offset", "best_epoch"}) {
    ASSERT_EQ(fa.metadata.count(k), fb.metadata.count(k)) << k;
    if (fa.metadata.count(k)) {
      EXPECT_EQ(fa.metadata.at(k), fb.metadata.at(k)) << k;
    }
  }
  EXPECT_TRUE(fa.metadata.count("epoch"));
  auto la = read_lines((a / "metrics.jsonl").string()), lb = read_lines((b / "metrics.jsonl").string());
  ASSERT_EQ(la.size(), lb.size());
  const std::vector<std::string> timing = {"train_seconds", "val_seconds", "images_per_second"};
  for (size_t i = 0; i < la.size(); ++i) EXPECT_EQ(without_fields(la[i], timing), without_fields(lb[i], timing));
}

}  // namespace mn_test_exp
