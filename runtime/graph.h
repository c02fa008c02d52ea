// A training step as a CUDA graph: captured once, replayed every step.
//
// A captured graph replays the device work it recorded with the arguments it
// recorded, so the work inside it must not depend on the host from step to
// step. The library marks every operation that would break that with
// graph_unsafe(what): a host read of tensor values (Tensor::to_vector, item),
// a tensor made from host data (Tensor::from_host / from_vector: an upload, or a
// constant frozen into the graph), a random draw (Generator::advance: the
// Philox offset would be frozen), and ops whose output size is read from the
// device (miners without a fixed capacity, masked_select). What it does depends
// on this thread's mode:
//   Eager    nothing (the default).
//   Audit    the first such operation is recorded (audit_reason()) and the
//            step runs on: an eager step that audits clean can be captured. The
//            audit works on the CPU too, which is how the tests check a step.
//   Capture  throws mn::Error naming the operation (the capture is abandoned).
//
// cuda::Graph captures a callable on a stream of its own (the library's
// stream() returns it while capturing) with the allocations made meanwhile
// taken from a memory pool private to the graph (their addresses are baked into
// it), and replays it ordered after everything queued before. Host-side values
// that kernels take as arguments (learning rates) are frozen too: the caller
// recaptures when they change (experiments/common: the study's graph_key()).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "runtime/device.h"

namespace mn {

enum class StepMode { Eager = 0, Audit, Capture };
StepMode step_mode();
// Called by the library before an operation a captured graph cannot replay.
void graph_unsafe(const char* what);

// Runs this thread's operations in Audit mode for the scope.
class StepAudit {
 public:
  StepAudit();
  ~StepAudit();
  StepAudit(const StepAudit&) = delete;
  StepAudit& operator=(const StepAudit&) = delete;
  // Empty when nothing graph-unsafe ran; otherwise the first operation's name.
  const std::string& reason() const;

 private:
  StepMode saved_;
};

namespace cuda {

// While this thread captures a graph (step_mode() == Capture): registers host
// bookkeeping that belongs to the captured device work (an optimizer's step
// count), run by the graph at every replay, right after it is queued; the
// capture itself queues nothing, so such bookkeeping must not count it.
// Elsewhere it does nothing.
void on_replay(std::function<void()> hook);

// The number of CUDA graphs captured and replayed by this process (tests, logs).
struct GraphStats {
  uint64_t captures = 0, replays = 0;
};
GraphStats graph_stats();

class Graph {
 public:
  explicit Graph(Device device);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // Records fn's device work (nothing runs). Returns "" when the graph is ready
  // to replay, else why capture failed (fn threw, or CUDA refused an operation);
  // the graph is then empty. fn's host-side effects happened either way.
  std::string capture(const std::function<void()>& fn);
  // Runs the recorded work on the device, after everything queued before it on
  // the library's stream and before everything queued after.
  void replay();
  bool ready() const;
  void reset();  // drops the recorded work and its memory pool

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuda
}  // namespace mn
