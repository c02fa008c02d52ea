// Deterministic mode (runtime/determinism.h): the switch, and the refusal that
// names the op and the cause. The CUDA ops that call the check are tested on a
// GPU (tests/kernels/test_indexing.cpp); here the check itself.
#include <gtest/gtest.h>

#include <string>

#include "runtime/determinism.h"
#include "runtime/error.h"

using namespace mn;

namespace {
struct Restore {
  bool saved = deterministic();
  ~Restore() { set_deterministic(saved); }
};
}  // namespace

TEST(Determinism, OffAllowsOnRefusesNamingTheOpAndTheCause) {
  Restore r;
  set_deterministic(false);
  EXPECT_FALSE(deterministic());
  EXPECT_NO_THROW(check_deterministic("index_add", "adds with float atomics"));
  set_deterministic(true);
  EXPECT_TRUE(deterministic());
  try {
    check_deterministic("index_add", "adds with float atomics");
    ADD_FAILURE() << "deterministic mode did not refuse";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("index_add (cuda) adds with float atomics"), std::string::npos) << m;
    EXPECT_NE(m.find("--deterministic"), std::string::npos) << m;
  }
}
