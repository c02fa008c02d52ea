// Paired one-tailed t-test; see stats.h.
#include "experiments/pair_selection/stats.h"

#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>

#include "runtime/error.h"

namespace mn::pairsel {

TTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  MN_CHECK(a.size() == b.size() && a.size() >= 2, "pair_selection: t-test",
           "need two equally long samples of >= 2 folds, got ", a.size(), " and ", b.size());
  const double n = static_cast<double>(a.size());
  double mean = 0.0;
  for (size_t i = 0; i < a.size(); ++i) mean += a[i] - b[i];
  mean /= n;
  double ss = 0.0;
  for (size_t i = 0; i < a.size(); ++i) ss += (a[i] - b[i] - mean) * (a[i] - b[i] - mean);
  const double sd = std::sqrt(ss / (n - 1.0));
  TTest r;
  r.df = n - 1.0;
  if (sd == 0.0) {
    r.t = mean == 0.0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), mean);
    r.p_greater = mean > 0.0 ? 0.0 : 1.0;
    r.p_less = mean < 0.0 ? 0.0 : 1.0;
    return r;
  }
  r.t = mean / (sd / std::sqrt(n));
  const boost::math::students_t dist(r.df);
  r.p_greater = boost::math::cdf(boost::math::complement(dist, r.t));
  r.p_less = boost::math::cdf(dist, r.t);
  return r;
}

}  // namespace mn::pairsel
