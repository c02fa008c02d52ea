// Parameter initialisers (PyTorch's torch.nn.init semantics), drawing from the
// seeded Philox generator (runtime/rng.h): the same seed and call sequence give
// bit-identical weights on the CPU and on the GPU, in float32 and float64.
//
// Call these qualified (init::normal_): mn::normal_ etc. (runtime/rng.h) are also
// found by argument-dependent lookup for a Tensor.
//
// Fans follow PyTorch: for a weight of shape (out, in, k...) — a linear weight
// (out_features, in_features) or a conv weight (K, C, R, S) —
//   fan_in = in * prod(k...), fan_out = out * prod(k...).
#pragma once
#include <cstdint>

#include "runtime/rng.h"
#include "runtime/tensor.h"

namespace mn::nn::init {

enum class Nonlinearity { Linear, Sigmoid, Tanh, ReLU, LeakyReLU, SELU };
enum class FanMode { FanIn, FanOut };

// Recommended gain: linear/sigmoid 1, tanh 5/3, relu sqrt(2),
// leaky_relu sqrt(2 / (1 + slope^2)), selu 3/4 (PyTorch's values).
double calculate_gain(Nonlinearity nl, double negative_slope = 0.01);

struct Fans {
  int64_t fan_in = 0;
  int64_t fan_out = 0;
};
// Throws for tensors with fewer than 2 dimensions.
Fans calculate_fans(const Tensor& w);

Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0,
                Generator& g = default_generator());
// Uniform in [a, b).
Tensor& uniform_(Tensor& t, double a = 0.0, double b = 1.0, Generator& g = default_generator());
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);

// Glorot & Bengio: U(-b, b), b = gain sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0, Generator& g = default_generator());
// N(0, std^2), std = gain sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& t, double gain = 1.0, Generator& g = default_generator());

// He et al.: std = gain / sqrt(fan), gain from (nonlinearity, a) as in calculate_gain
// (a is the leaky-ReLU negative slope; PyTorch's default is leaky_relu with a = 0,
// i.e. gain sqrt(2)). kaiming_uniform_ draws U(-b, b), b = sqrt(3) std.
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                         Nonlinearity nl = Nonlinearity::LeakyReLU,
                         Generator& g = default_generator());
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nl = Nonlinearity::LeakyReLU,
                        Generator& g = default_generator());

}  // namespace mn::nn::init
