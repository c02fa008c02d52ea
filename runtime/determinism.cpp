#include "runtime/determinism.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "runtime/error.h"

namespace mn {
namespace {
std::atomic<bool>& flag() {
  static std::atomic<bool> f{[] {
    const char* e = std::getenv("MN_DETERMINISTIC");
    return e != nullptr && std::strcmp(e, "1") == 0;
  }()};
  return f;
}
}  // namespace

void set_deterministic(bool on) { flag().store(on); }
bool deterministic() { return flag().load(); }

void check_deterministic(const char* op, const char* why) {
  MN_CHECK(!deterministic(), op, " (cuda) ", why,
           ", so its result can differ in the last bits from run to run; deterministic mode "
           "(--deterministic, MN_DETERMINISTIC=1, set_deterministic(true)) refuses it. Run on the CPU, "
           "or turn deterministic mode off");
}

}  // namespace mn
