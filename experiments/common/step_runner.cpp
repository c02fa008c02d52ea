// The harness's training step, eager or as a CUDA graph (step_runner.h).
#include "experiments/common/step_runner.h"

#include <cstdio>

namespace mn::exp {

StepRunner::StepRunner(Study& st, const Flags& f, Device device)
    : st_(st),
      device_(device),
      split_(st.split_step()),
      graph_wanted_(split_ && f.flag("cuda-graph") && device.is_cuda()),
      audit_on_cpu_(split_ && f.flag("cuda-graph") && !device.is_cuda()) {
  if (!split_)
    status_ = "off: the study's step is not split into a host and a device part";
  else if (!f.flag("cuda-graph"))
    status_ = "off: --no-cuda-graph";
  else
    status_ = device.is_cuda() ? "pending" : "cpu: not audited yet";
}

DeviceStats StepRunner::step() {
  if (!split_) return st_.train_step_on_device();
  st_.prepare_step();
  ++steps_;
  if (!graph_wanted_) {
    // On the CPU the third step is audited anyway: what a GPU run would do.
    if (!audit_on_cpu_ || steps_ != kWarmup + 1) return st_.compute_step();
    StepAudit audit;
    DeviceStats s = st_.compute_step();
    status_ = audit.reason().empty() ? "cpu: the step audits clean (a GPU run would capture it)"
                                     : "cpu: a GPU run would not capture the step: " + audit.reason();
    return s;
  }
  if (steps_ <= kWarmup) return st_.compute_step();  // lazily made state (optimizer slots, tables) first
  if (!graph_) {
    StepAudit audit;
    DeviceStats s = st_.compute_step();
    if (!audit.reason().empty()) return off("the step does " + audit.reason(), s);
    graph_ = std::make_unique<cuda::Graph>(device_);
    return s;
  }
  const std::string key = st_.graph_key();
  if (!graph_->ready() || key != key_) {
    if (graph_->ready() && last_capture_ == steps_ - 1)
      return off("a value the step passes to its kernels changes every step (" + key + ")", st_.compute_step());
    DeviceStats out;
    const std::string why = graph_->capture([&] { out = st_.compute_step(); });
    if (!why.empty()) {
      // Nothing of the capture ran on the device, so the step runs again
      // eagerly. Its host side ran twice: harmless for what the audit lets
      // through (no random draws; the optimizer counts a captured step only at
      // its replays, cuda::on_replay).
      return off("capture failed: " + why, st_.compute_step());
    }
    key_ = key;
    captured_ = out;
    last_capture_ = steps_;
    ++captures_;
    if (captures_ == 1) {
      std::printf("\ncuda graph: the training step is captured; it is replayed from step %lld on\n",
                  static_cast<long long>(steps_));
      std::fflush(stdout);
    }
    status_ = "on: captured " + std::to_string(captures_) + " time(s)";
  }
  graph_->replay();
  return captured_;
}

DeviceStats StepRunner::off(const std::string& why, DeviceStats s) {
  graph_wanted_ = false;
  graph_.reset();
  captured_ = {};
  status_ = "off: " + why;
  std::printf("\ncuda graph: off from step %lld: %s\n", static_cast<long long>(steps_), why.c_str());
  std::fflush(stdout);
  return s;
}

}  // namespace mn::exp
