// Learning-rate and momentum schedules (nn/optim/schedule.h).
#include "nn/optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace mn::nn {

LrSchedule::LrSchedule(Optimizer& opt) : opt_(opt) {
  for (size_t g = 0; g < opt.num_groups(); ++g) base_.push_back(opt.group(g).lr);
}

void LrSchedule::apply(int64_t epoch) {
  MN_CHECK(epoch >= 0, "LrSchedule::apply: negative epoch ", epoch);
  MN_CHECK(opt_.num_groups() == base_.size(), "LrSchedule::apply: the optimizer had ",
           base_.size(), " groups when the schedule was built and has ", opt_.num_groups(), " now");
  const double f = factor(epoch);
  for (size_t g = 0; g < base_.size(); ++g) opt_.group(g).lr = base_[g] * f;
}

ExponentialDecay::ExponentialDecay(Optimizer& opt, double gamma) : LrSchedule(opt), gamma_(gamma) {
  MN_CHECK(gamma > 0.0, "ExponentialDecay: gamma must be positive, got ", gamma);
}

double ExponentialDecay::factor(int64_t epoch) const {
  return std::pow(gamma_, static_cast<double>(epoch));
}

StepDecay::StepDecay(Optimizer& opt, int64_t step_epochs, double gamma)
    : LrSchedule(opt), step_(step_epochs), gamma_(gamma) {
  MN_CHECK(step_epochs > 0, "StepDecay: step must be positive, got ", step_epochs);
  MN_CHECK(gamma > 0.0, "StepDecay: gamma must be positive, got ", gamma);
}

double StepDecay::factor(int64_t epoch) const {
  return std::pow(gamma_, static_cast<double>(epoch / step_));
}

CosineDecay::CosineDecay(Optimizer& opt, int64_t total_epochs) : LrSchedule(opt), total_(total_epochs) {
  MN_CHECK(total_epochs > 0, "CosineDecay: the schedule needs a positive number of epochs, got ", total_epochs);
}

double CosineDecay::factor(int64_t epoch) const {
  const double t = static_cast<double>(std::min(std::max<int64_t>(epoch, 0), total_)) / static_cast<double>(total_);
  constexpr double kPi = 3.14159265358979323846;
  return 0.5 * (1.0 + std::cos(kPi * t));
}

MomentumRamp::MomentumRamp(Optimizer& opt, double start, int64_t ramp_epochs)
    : opt_(opt), start_(start), epochs_(ramp_epochs) {
  MN_CHECK(ramp_epochs >= 0, "MomentumRamp: negative ramp length ", ramp_epochs);
  MN_CHECK(start >= 0.0 && start < 1.0, "MomentumRamp: start momentum must be in [0, 1), got ",
           start);
  for (size_t g = 0; g < opt.num_groups(); ++g) final_.push_back(opt.group(g).momentum);
}

double MomentumRamp::momentum(size_t group, int64_t epoch) const {
  MN_CHECK(group < final_.size(), "MomentumRamp: group ", group, " out of range");
  MN_CHECK(epoch >= 0, "MomentumRamp: negative epoch ", epoch);
  if (epochs_ == 0) return final_[group];
  const double t = static_cast<double>(std::min(epoch, epochs_)) / static_cast<double>(epochs_);
  return start_ + (final_[group] - start_) * t;
}

void MomentumRamp::apply(int64_t epoch) {
  MN_CHECK(opt_.num_groups() == final_.size(), "MomentumRamp::apply: the optimizer had ",
           final_.size(), " groups when the ramp was built and has ", opt_.num_groups(), " now");
  for (size_t g = 0; g < final_.size(); ++g) opt_.group(g).momentum = momentum(g, epoch);
}

}  // namespace mn::nn
