// nn::MaxPool2d and nn::AvgPool2d (nn/layers/pool.h).
#include "nn/layers/pool.h"

namespace mn::nn {

Variable MaxPool2d::forward(const Variable& x) { return ag::max_pool2d(x, p_); }
Variable AvgPool2d::forward(const Variable& x) { return ag::avg_pool2d(x, p_); }

}  // namespace mn::nn
