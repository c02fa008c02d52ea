// Per-epoch schedules for an Optimizer's groups. Every schedule is a pure
// function of the epoch (0-based) and the values captured when it was built,
// so apply(epoch) after resuming from a checkpoint gives the same values as an
// uninterrupted run:
//   ExponentialDecay  lr_g(e) = base_g * gamma^e               (Koch: gamma = 0.99)
//   StepDecay         lr_g(e) = base_g * gamma^floor(e / step)  (the sampling study: 0.1 every 8)
//   CosineDecay       lr_g(e) = base_g * (1 + cos(pi * min(e, E) / E)) / 2 over E epochs
//                     (Loshchilov & Hutter's SGDR without restarts, stepped per epoch:
//                     1 at epoch 0, 1/2 at E/2, about (pi/E)^2/4 in the last epoch E-1)
//   MomentumRamp      mom_g(e) = start + (final_g - start) * min(e, E) / E
//                     (Koch: from 0.5 to each layer's final momentum; E = 0 gives final_g)
// Gradient-norm clipping is Optimizer::clip_grad_norm (nn/optim/optimizer.h).
#pragma once
#include <cstdint>
#include <vector>

#include "nn/optim/optimizer.h"

namespace mn::nn {

class LrSchedule {
 public:
  // Captures each group's current lr as its base lr.
  explicit LrSchedule(Optimizer& opt);
  virtual ~LrSchedule() = default;
  virtual double factor(int64_t epoch) const = 0;
  // Sets every group's lr to base * factor(epoch).
  void apply(int64_t epoch);
  double lr(size_t group, int64_t epoch) const { return base_.at(group) * factor(epoch); }
  const std::vector<double>& base_lrs() const { return base_; }

 private:
  Optimizer& opt_;
  std::vector<double> base_;
};

class ExponentialDecay : public LrSchedule {
 public:
  ExponentialDecay(Optimizer& opt, double gamma);
  double factor(int64_t epoch) const override;

 private:
  double gamma_;
};

class StepDecay : public LrSchedule {
 public:
  StepDecay(Optimizer& opt, int64_t step_epochs, double gamma = 0.1);
  double factor(int64_t epoch) const override;

 private:
  int64_t step_;
  double gamma_;
};

class CosineDecay : public LrSchedule {
 public:
  CosineDecay(Optimizer& opt, int64_t total_epochs);
  double factor(int64_t epoch) const override;

 private:
  int64_t total_;
};

class MomentumRamp {
 public:
  // Captures each group's current momentum as its final momentum.
  MomentumRamp(Optimizer& opt, double start, int64_t ramp_epochs);
  double momentum(size_t group, int64_t epoch) const;
  void apply(int64_t epoch);
  const std::vector<double>& final_momenta() const { return final_; }

 private:
  Optimizer& opt_;
  double start_;
  int64_t epochs_;
  std::vector<double> final_;
};

}  // namespace mn::nn
