// Parameter initialisers on top of the Philox tensor fills (see nn/init.h).
#include "nn/init.h"

#include <cmath>

#include "runtime/error.h"

namespace mn::nn::init {

double calculate_gain(Nonlinearity nl, double negative_slope) {
  switch (nl) {
    case Nonlinearity::Linear:
    case Nonlinearity::Sigmoid: return 1.0;
    case Nonlinearity::Tanh: return 5.0 / 3.0;
    case Nonlinearity::ReLU: return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: return std::sqrt(2.0 / (1.0 + negative_slope * negative_slope));
    case Nonlinearity::SELU: return 0.75;
  }
  MN_THROW("calculate_gain: unknown nonlinearity");
}

Fans calculate_fans(const Tensor& w) {
  MN_CHECK(w.defined(), "calculate_fans: undefined tensor");
  MN_CHECK(w.dim() >= 2, "calculate_fans: fan in and fan out need a tensor with >= 2 dimensions, got ",
           shape_str(w.shape()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < w.dim(); ++d) receptive *= w.size(d);
  return Fans{w.size(1) * receptive, w.size(0) * receptive};
}

Tensor& normal_(Tensor& t, double mean, double std, Generator& g) {
  mn::normal_(t, mean, std, g);
  return t;
}

Tensor& uniform_(Tensor& t, double a, double b, Generator& g) {
  mn::uniform_(t, a, b, g);
  return t;
}

Tensor& constant_(Tensor& t, double value) {
  MN_CHECK(t.defined(), "constant_: undefined tensor");
  return t.fill_(value);
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

// Zero-element weights are left alone (PyTorch warns and returns).
Tensor& xavier_uniform_(Tensor& t, double gain, Generator& g) {
  if (t.defined() && t.numel() == 0) return t;
  const Fans f = calculate_fans(t);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(f.fan_in + f.fan_out));
  return init::uniform_(t, -bound, bound, g);
}

Tensor& xavier_normal_(Tensor& t, double gain, Generator& g) {
  if (t.defined() && t.numel() == 0) return t;
  const Fans f = calculate_fans(t);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
  return init::normal_(t, 0.0, std, g);
}

namespace {
double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nl, const char* op) {
  const Fans f = calculate_fans(t);
  const int64_t fan = mode == FanMode::FanIn ? f.fan_in : f.fan_out;
  MN_CHECK(fan > 0, op, ": zero fan for weight of shape ", shape_str(t.shape()));
  return calculate_gain(nl, a) / std::sqrt(static_cast<double>(fan));
}
}  // namespace

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, Nonlinearity nl, Generator& g) {
  if (t.defined() && t.numel() == 0) return t;
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nl, "kaiming_uniform_");
  return init::uniform_(t, -bound, bound, g);
}

Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, Nonlinearity nl, Generator& g) {
  if (t.defined() && t.numel() == 0) return t;
  return init::normal_(t, 0.0, kaiming_std(t, a, mode, nl, "kaiming_normal_"), g);
}

}  // namespace mn::nn::init
