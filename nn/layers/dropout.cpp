// nn::Dropout (nn/layers/dropout.h).
#include "nn/layers/dropout.h"

namespace mn::nn {

Dropout::Dropout(double p, Generator& gen) : p_(p), gen_(&gen) {
  MN_CHECK(p >= 0.0 && p <= 1.0, "Dropout: p must be in [0, 1], got ", p);
}

Variable Dropout::forward(const Variable& x) { return ag::dropout(x, p_, is_training(), *gen_); }

}  // namespace mn::nn
