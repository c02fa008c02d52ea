// A bad-input corpus run against every experiment binary in build/experiments
// (each one a separate process, as a user runs it): unknown flags, a FIFO, a
// folder or garbage as --config, out-of-range numbers, --resume with no, a
// garbage or a folder checkpoint, --out-dir that is a file, --evaluate of a
// folder, a missing data folder. Every case must end within the timeout with
// exit status 1 or 2 (never 0, a signal or a hang) and one clean last line on
// stderr that names the flag or file at fault (no "terminate called", no
// failed check, no source path). Cases whose flag a binary does not have
// (its --help-all does not list it) are skipped for that binary.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/experiments/omniglot_fixture.h"

namespace {

namespace fs = std::filesystem;
using mn_test_exp::TempDir;

struct Outcome {
  int status = -1;  // exit status, or 128 + signal
  std::string err;
};

// stderr (or stdout with `stdout_only`) to the pipe, the other dropped;
// `timeout` turns a hang into status 124.
Outcome run(const std::string& cmd, bool stdout_only = false) {
  Outcome o;
  FILE* p = ::popen(("timeout 60 " + cmd + (stdout_only ? " 2>/dev/null" : " 2>&1 1>/dev/null")).c_str(), "r");
  if (!p) return o;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) o.err.append(buf, n);
  const int st = ::pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return o;
}

std::vector<std::string> binaries() {
  std::vector<std::string> out;
  const fs::path dir = fs::path(MN_BINARY_DIR) / "experiments";
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const auto perms = e.status().permissions();
    if ((perms & fs::perms::owner_exec) == fs::perms::none) continue;
    out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string last_line(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const size_t k = t.rfind('\n');
  return k == std::string::npos ? t : t.substr(k + 1);
}

}  // namespace

TEST(BadInputCorpus, EveryBinaryRefusesEveryCaseCleanly) {
  const auto bins = binaries();
  if (bins.empty()) GTEST_SKIP() << "no experiment binaries in " << MN_BINARY_DIR << "/experiments (build them first)";
  TempDir tmp("bad_inputs");
  const std::string fifo = tmp / "fifo.cfg", folder = tmp / "a_folder", garbage_cfg = tmp / "garbage.cfg",
                    unknown_cfg = tmp / "unknown.cfg", empty_out = tmp / "empty_out", bad_ckpt = tmp / "bad_ckpt",
                    dir_ckpt = tmp / "dir_ckpt", file_out = tmp / "a_file";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  fs::create_directories(folder);
  fs::create_directories(empty_out);
  fs::create_directories(bad_ckpt);
  fs::create_directories(fs::path(dir_ckpt) / "last.safetensors");
  std::ofstream(garbage_cfg) << "this line has no separator\n";
  std::ofstream(unknown_cfg) << "no-such-key = 1\n";
  std::ofstream(fs::path(bad_ckpt) / "last.safetensors") << "\x07garbage, not a safetensors file";
  std::ofstream(file_out) << "a regular file\n";

  struct Case {
    const char* needs;  // a flag the binary must list in --help ("" = all)
    std::string args;   // after the binary
    std::string names;  // what the error line must name
  };
  const std::vector<Case> cases{
      {"", "--no-such-flag 3", "no-such-flag"},
      {"--config", "--config " + fifo, fifo},
      {"--config", "--config " + folder, folder},
      {"--config", "--config " + garbage_cfg, "garbage.cfg:1"},
      {"--config", "--config " + unknown_cfg, "no-such-key"},
      {"--seed", "--seed -1", "--seed"},
      {"--time-limit", "--time-limit -5", "--time-limit"},
      {"--epochs", "--epochs -1", "--epochs"},
      {"--resume", "--resume --out-dir " + empty_out, "last.safetensors"},
      {"--resume", "--resume --out-dir " + bad_ckpt, "last.safetensors"},
      {"--resume", "--resume --out-dir " + dir_ckpt, "last.safetensors"},
      {"--out-dir", "--out-dir " + file_out, "--out-dir"},
      {"--evaluate", "--evaluate " + folder, folder},
      {"--data-dir", "--data-dir " + tmp / "no/such/folder", "no/such/folder"},
  };
  int ran = 0;
  for (const auto& bin : bins) {
    // --help-all: a binary's --help may show only the flags a run needs (flags.h, help groups).
    const std::string help = run(bin + " --help-all", true).err;
    ASSERT_FALSE(help.empty()) << bin << " --help-all printed nothing";
    for (const auto& c : cases) {
      if (*c.needs && help.find(std::string(c.needs) + " ") == std::string::npos) continue;
      const std::string what = fs::path(bin).filename().string() + " " + c.args;
      // A case the binary wrongly accepted must not train in the working folder.
      const std::string out = c.args.find("--out-dir") == std::string::npos && help.find("--out-dir ") != std::string::npos
                                  ? " --out-dir " + tmp / "out" : "";
      const Outcome o = run(bin + " " + c.args + out);
      ++ran;
      EXPECT_TRUE(o.status == 1 || o.status == 2) << what << ": exit status " << o.status
                                                   << (o.status == 124 ? " (hung: killed by timeout)" : "") << "\n" << o.err;
      const std::string line = last_line(o.err);
      EXPECT_NE(line.find(c.names), std::string::npos) << what << ": the error does not name '" << c.names << "': " << line;
      for (const char* bad : {"terminate called", "what():", "check '", "check `", ".cpp:", "Segmentation"})
        EXPECT_EQ(o.err.find(bad), std::string::npos) << what << ": " << o.err;
    }
  }
  EXPECT_GE(ran, 6 * static_cast<int>(bins.size())) << "too few cases ran";
}
