// Helpers shared by the data tests: a temporary folder removed at scope exit,
// the real-data root ($MN_DATA_DIR or <source>/../shared/datasets), and
// expect-throw-with-message.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "runtime/error.h"

namespace mn::test {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() /
           ("mn_data_test_" + std::to_string(rd()) + "_" + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& rel) const { return (path / rel).string(); }
};

// Root of the shared data sets, or "" when absent.
inline std::string data_root() {
  if (const char* e = std::getenv("MN_DATA_DIR"); e && *e) return e;
  std::string p = std::string(MN_SOURCE_DIR) + "/../shared/datasets";
  std::error_code ec;
  return std::filesystem::is_directory(p, ec) ? p : std::string();
}

inline std::string data_path(const std::string& rel) {
  std::string r = data_root();
  if (r.empty()) return "";
  std::error_code ec;
  std::string p = r + "/" + rel;
  return std::filesystem::exists(p, ec) ? p : std::string();
}

}  // namespace mn::test

#define MN_SKIP_IF_NO_DATA(var, rel)                                                   \
  const std::string var = ::mn::test::data_path(rel);                                  \
  if (var.empty())                                                                     \
  GTEST_SKIP() << "data set '" << (rel)                                                \
               << "' not found (set MN_DATA_DIR or provide ../shared/datasets): skipped"

// Expects `stmt` to throw mn::Error whose message contains both substrings.
#define EXPECT_MN_ERROR(stmt, sub1, sub2)                                              \
  do {                                                                                 \
    try {                                                                              \
      stmt;                                                                            \
      ADD_FAILURE() << "expected mn::Error from " #stmt;                               \
    } catch (const ::mn::Error& e) {                                                   \
      std::string m = e.what();                                                        \
      EXPECT_NE(m.find(sub1), std::string::npos) << "message: " << m;                  \
      EXPECT_NE(m.find(sub2), std::string::npos) << "message: " << m;                  \
    }                                                                                  \
  } while (0)
