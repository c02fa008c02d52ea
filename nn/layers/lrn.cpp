// nn::LRN (nn/layers/lrn.h).
#include "nn/layers/lrn.h"

namespace mn::nn {

LRN::LRN(int64_t size, double alpha, double beta, double k, bool alpha_over_n) {
  opt_.size = size;
  opt_.alpha = alpha;
  opt_.beta = beta;
  opt_.k = k;
  opt_.alpha_over_n = alpha_over_n;
}

Variable LRN::forward(const Variable& x) { return ag::lrn(x, opt_); }

}  // namespace mn::nn
