// Significance of the informed-pair-selection study: a one-tailed paired
// t-test over folds (method vs BASE at the same epoch), with Boost.Math's
// Student-t distribution.
#pragma once
#include <vector>

namespace mn::pairsel {

struct TTest {
  double t = 0.0;          // mean(d) / (sd(d) / sqrt(n)), d = a - b per fold
  double df = 0.0;         // n - 1
  double p_greater = 1.0;  // one-tailed p for mean(a) > mean(b)
  double p_less = 1.0;     // one-tailed p for mean(a) < mean(b)
};

// Paired t-test of a against b (same length >= 2). When every difference is
// equal (sd = 0) t is +-inf (or 0 with all differences 0) and the p-values
// are 0 / 1 (or 1 / 1) accordingly.
TTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace mn::pairsel
