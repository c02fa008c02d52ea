// The harness's training step (experiments/common/harness.h): a study's
// train_step_on_device(), or its split step's two parts with compute_step() run
// as a CUDA graph on a GPU where the step allows (runtime/graph.h): two eager
// steps, an audit of the third, one capture, replays, a new capture when
// graph_key() changes, eager steps with a logged reason when the audit or a
// capture fails. On the CPU the third step is audited too (the verdict goes to
// summary.json's "cuda_graph").
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "experiments/common/harness.h"
#include "runtime/graph.h"

namespace mn::exp {

class StepRunner {
 public:
  StepRunner(Study& st, const Flags& f, Device device);
  DeviceStats step();
  // For summary.json: "on: captured N time(s)", "off: <why>", or the CPU's audit verdict.
  const std::string& status() const { return status_; }

 private:
  static constexpr int64_t kWarmup = 2;
  DeviceStats off(const std::string& why, DeviceStats s);
  Study& st_;
  Device device_;
  bool split_, graph_wanted_, audit_on_cpu_;
  int64_t steps_ = 0, last_capture_ = -1, captures_ = 0;
  std::unique_ptr<cuda::Graph> graph_;
  std::string key_, status_;
  DeviceStats captured_;
};

}  // namespace mn::exp
