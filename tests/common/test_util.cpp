// Shared test helpers (see test_util.h).
#include "tests/common/test_util.h"

#include <cstdlib>

#include "runtime/allocator.h"

#include <cmath>
#include <random>
#include <sstream>

namespace mn::test {

std::vector<double> rand_vec(int64_t n, double lo, double hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> U(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = U(rng);
  return v;
}

Tensor rand(const Shape& shape, double lo, double hi, DType dtype, Device device, uint64_t seed) {
  return Tensor::from_vector(rand_vec(numel_of(shape), lo, hi, seed), shape).to(dtype).to(device);
}

Tensor randn(const Shape& shape, DType dtype, Device device, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> N(0.0, 1.0);
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (auto& x : v) x = N(rng);
  return Tensor::from_vector(v, shape).to(dtype).to(device);
}

::testing::AssertionResult all_close(const std::vector<double>& ref, const std::vector<double>& x,
                                     double atol, double rtol) {
  if (ref.size() != x.size())
    return ::testing::AssertionFailure() << "size mismatch: " << ref.size() << " vs " << x.size();
  std::ostringstream os;
  int64_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    bool both_nan = std::isnan(ref[i]) && std::isnan(x[i]);
    double diff = std::abs(ref[i] - x[i]);
    bool ok = both_nan || diff <= atol + rtol * std::abs(ref[i]);
    if (!ok) {
      if (bad < 8) os << "\n  [" << i << "] ref " << ref[i] << " got " << x[i] << " (|diff| " << diff << ")";
      bad++;
      if (!(diff <= worst)) worst = diff;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << ref.size()
                                       << " elements differ beyond atol " << atol << " + rtol "
                                       << rtol << " * |ref| (worst |diff| " << worst << "):" << os.str();
}

::testing::AssertionResult all_close(const Tensor& ref, const Tensor& x, double atol, double rtol) {
  if (ref.shape() != x.shape())
    return ::testing::AssertionFailure() << "shape mismatch: " << ref.desc() << " vs " << x.desc();
  return all_close(ref.to_double_vector(), x.to_double_vector(), atol, rtol);
}

void expect_device_report(const std::function<Tensor()>& op, const std::string& what,
                          const Tensor& probe) {
  const Tensor y = op();  // queued: nothing synchronises here
  try {
    (void)y.cpu();
    ADD_FAILURE() << what << ": the bad index was not reported";
  } catch (const std::exception& err) {
    EXPECT_NE(std::string(err.what()).find(what), std::string::npos) << err.what();
  }
  EXPECT_NO_THROW((void)probe.cpu()) << "the report was not cleared";
}

PoisonScope::PoisonScope(bool on) : saved_(poison_enabled()) { set_poison(on); }
PoisonScope::~PoisonScope() { set_poison(saved_); }

bool full_size_shapes() {
  const char* v = std::getenv("MN_TEST_SHAPES");
  return !(v && std::string(v) == "small");
}

std::vector<Shape> sized(std::vector<Shape> shapes) {
  if (full_size_shapes()) return shapes;
  std::vector<Shape> out;
  for (const Shape& s : shapes) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    if (n <= 1000000) out.push_back(s);
  }
  return out;
}

}  // namespace mn::test
