// Distance modules (nn/layers/distance.h).
#include "nn/layers/distance.h"

namespace mn::nn {

Variable DistanceModule::forward(const Variable&) {
  MN_THROW("distance module: takes two inputs, call forward(a, b)");
}

}  // namespace mn::nn
