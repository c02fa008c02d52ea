// Step audit and CUDA graph capture / replay (runtime/graph.h).
#include "runtime/graph.h"

#include <mutex>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/error.h"
#ifdef MN_WITH_CUDA
#include "runtime/cuda_check.h"
#endif

namespace mn {

namespace {
thread_local StepMode tl_mode = StepMode::Eager;
thread_local std::string tl_reason;
std::mutex g_graph_mu;
cuda::GraphStats g_graph_stats;
// The replay hooks of the graph this thread is capturing (cuda::on_replay).
thread_local std::vector<std::function<void()>>* tl_hooks = nullptr;
}  // namespace

StepMode step_mode() { return tl_mode; }

void graph_unsafe(const char* what) {
  if (tl_mode == StepMode::Eager) return;
  if (tl_mode == StepMode::Audit) {
    if (tl_reason.empty()) tl_reason = what;
    return;
  }
  MN_THROW("CUDA graph capture: ", what, " cannot be replayed by a graph");
}

StepAudit::StepAudit() : saved_(tl_mode) {
  tl_mode = StepMode::Audit;
  tl_reason.clear();
}
StepAudit::~StepAudit() { tl_mode = saved_; }
const std::string& StepAudit::reason() const { return tl_reason; }

namespace cuda {

void on_replay(std::function<void()> hook) {
  if (tl_mode == StepMode::Capture && tl_hooks) tl_hooks->push_back(std::move(hook));
}

GraphStats graph_stats() {
  std::lock_guard<std::mutex> lk(g_graph_mu);
  return g_graph_stats;
}

#ifdef MN_WITH_CUDA
struct Graph::Impl {
  Device device;
  cudaStream_t stream = nullptr;  // capture and replay
  cudaEvent_t before = nullptr, after = nullptr;
  cudaGraphExec_t exec = nullptr;
  int pool = 0;
  std::vector<std::function<void()>> hooks;  // on_replay(), run after each launch
};

Graph::Graph(Device device) : impl_(std::make_unique<Impl>()) {
  MN_CHECK(device.is_cuda(), "cuda::Graph: ", device.str(), " is not a CUDA device");
  impl_->device = device;
  const CudaDeviceScope guard(device);
  CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&impl_->before, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&impl_->after, cudaEventDisableTiming));
}

Graph::~Graph() {
  const CudaDeviceScope guard(impl_->device);
  reset();
  CUDA_CHECK_NOTHROW(cudaEventDestroy(impl_->before));
  CUDA_CHECK_NOTHROW(cudaEventDestroy(impl_->after));
  CUDA_CHECK_NOTHROW(cudaStreamDestroy(impl_->stream));
}

bool Graph::ready() const { return impl_->exec != nullptr; }

void Graph::reset() {
  const CudaDeviceScope guard(impl_->device);
  if (impl_->exec) {
    CUDA_CHECK_NOTHROW(cudaStreamSynchronize(impl_->stream));  // no replay still running
    CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(impl_->exec));
    impl_->exec = nullptr;
  }
  impl_->hooks.clear();
  if (impl_->pool) {
    release_pool(impl_->pool);
    impl_->pool = 0;
  }
}

std::string Graph::capture(const std::function<void()>& fn) {
  reset();
  const CudaDeviceScope guard(impl_->device);
  impl_->pool = create_pool();
  // Relaxed: the pool may call cudaMalloc while capturing (its blocks live as long as the graph).
  CUDA_CHECK(cudaStreamBeginCapture(impl_->stream, cudaStreamCaptureModeRelaxed));
  const int saved_pool = thread_pool();
  const StepMode saved_mode = tl_mode;
  set_thread_pool(impl_->pool);
  set_capture_stream(impl_->stream);
  tl_mode = StepMode::Capture;
  auto* const saved_hooks = tl_hooks;
  tl_hooks = &impl_->hooks;
  std::string why;
  try {
    fn();
  } catch (const std::exception& e) {
    why = e.what();
  }
  tl_hooks = saved_hooks;
  tl_mode = saved_mode;
  set_capture_stream(nullptr);
  set_thread_pool(saved_pool);
  cudaGraph_t g = nullptr;
  const cudaError_t end = cudaStreamEndCapture(impl_->stream, &g);
  if (why.empty() && end != cudaSuccess)
    why = std::string("CUDA refused an operation of the step (") + cudaGetErrorName(end) + ": " +
          cudaGetErrorString(end) + ")";
  if (why.empty()) {
    const cudaError_t inst = cudaGraphInstantiateWithFlags(&impl_->exec, g, 0);
    if (inst != cudaSuccess) {
      why = std::string("cudaGraphInstantiate failed (") + cudaGetErrorName(inst) + ")";
      impl_->exec = nullptr;
    }
  }
  if (g) CUDA_CHECK_NOTHROW(cudaGraphDestroy(g));
  (void)cudaGetLastError();  // a failed capture leaves its error behind: clear it
  if (!why.empty()) {
    reset();
    return why;
  }
  std::lock_guard<std::mutex> lk(g_graph_mu);
  g_graph_stats.captures++;
  return "";
}

void Graph::replay() {
  MN_CHECK(impl_->exec, "cuda::Graph::replay: nothing captured");
  const CudaDeviceScope guard(impl_->device);
  // Ordered after the work queued on the library's stream, and that stream's later work after it.
  CUDA_CHECK(cudaEventRecord(impl_->before, stream()));
  CUDA_CHECK(cudaStreamWaitEvent(impl_->stream, impl_->before, 0));
  CUDA_CHECK(cudaGraphLaunch(impl_->exec, impl_->stream));
  CUDA_CHECK(cudaEventRecord(impl_->after, impl_->stream));
  CUDA_CHECK(cudaStreamWaitEvent(stream(), impl_->after, 0));
  for (const auto& hook : impl_->hooks) hook();
  std::lock_guard<std::mutex> lk(g_graph_mu);
  g_graph_stats.replays++;
}
#else
struct Graph::Impl {};
Graph::Graph(Device device) { MN_THROW("cuda::Graph: ", device.str(), ": this build has no CUDA"); }
Graph::~Graph() = default;
bool Graph::ready() const { return false; }
void Graph::reset() {}
std::string Graph::capture(const std::function<void()>&) { return "this build has no CUDA"; }
void Graph::replay() { MN_THROW("cuda::Graph::replay: this build has no CUDA"); }
#endif

}  // namespace cuda
}  // namespace mn
