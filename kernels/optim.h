// Fused multi-tensor optimizer kernels: SGD (momentum, Nesterov, L2 decay),
// Adam (L2 decay added to the gradient) and AdamW (decoupled decay), plus the
// global gradient-norm reduction and clip scaling used by gradient clipping.
//
// One launch updates every tensor of a parameter group. The group is described
// by a table of MultiTensorDesc {param, grad, state0, state1, numel} and a table
// of fixed-size chunks {tensor index, start}; a CUDA block (or a CPU task) walks
// chunks, so one kernel covers tensors of any sizes. MultiTensorPlan builds both
// tables on the host and keeps a cached device copy that is re-uploaded only
// when a pointer or a size changes (in a training loop: once).
//
// Update equations (PyTorch's, per element, g = grad):
//   SGD:   g += wd * p;  if momentum: buf = first ? g : mom * buf + (1 - damp) * g;
//          g = nesterov ? g + mom * buf : buf;  p -= lr * g
//   Adam:  g += wd * p (L2);  AdamW: p *= 1 - lr * wd (decoupled)
//          m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//          p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//
// Zeroing: with `zero_grad` set, each kernel writes grad = 0 right after reading it
// (Optimizer::step_and_zero_grad: the update and zero_grad() in one pass, no fill
// launch per parameter).
//
// Several Adam groups in one launch (adam_step_groups_*): each descriptor's `group`
// indexes a table of AdamHyper; on CUDA the table is a kernel argument (host values,
// frozen into a captured graph as a single group's are) and the bias corrections come
// from each group's device step count inside the kernel, whose last block advances the
// counts: one launch for every group instead of two per group.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace mn::kernels {

// One tensor of a fused launch. Pointers point to contiguous buffers of the
// launch's scalar type on the launch's device; unused state pointers are null.
struct MultiTensorDesc {
  void* param = nullptr;        // (numel) updated in place
  void* grad = nullptr;         // (numel) read (clip: scaled in place)
  void* state0 = nullptr;       // (numel) SGD momentum buffer / Adam exp_avg
  void* state1 = nullptr;       // (numel) Adam exp_avg_sq
  int64_t numel = 0;
  int64_t group = 0;            // multi-group launches: index into the hyperparameter table
  bool operator==(const MultiTensorDesc& o) const {
    return param == o.param && grad == o.grad && state0 == o.state0 && state1 == o.state1 &&
           numel == o.numel && group == o.group;
  }
};

// A run of at most kMultiTensorChunk elements of one tensor.
struct MultiTensorChunk {
  int64_t tensor = 0;  // index into the descriptor table
  int64_t start = 0;   // first element of the chunk inside that tensor
};

constexpr int64_t kMultiTensorChunk = 8192;

// Host tables plus a cached device copy (one allocation holding both tables).
class MultiTensorPlan {
 public:
  // Rebuilds the chunk table and marks the device copy stale only when `descs`
  // differs from the cached one. Returns true when it changed.
  bool set(const std::vector<MultiTensorDesc>& descs);
  const std::vector<MultiTensorDesc>& descs() const { return descs_; }
  const std::vector<MultiTensorChunk>& chunks() const { return chunks_; }
  int64_t num_chunks() const { return static_cast<int64_t>(chunks_.size()); }
  bool empty() const { return chunks_.empty(); }
  // Device pointers to the tables on `device` (uploads when stale).
  const MultiTensorDesc* device_descs(Device device);
  const MultiTensorChunk* device_chunks(Device device);
  int64_t uploads() const { return uploads_; }  // how often the tables were copied

 private:
  void upload(Device device);
  std::vector<MultiTensorDesc> descs_;
  std::vector<MultiTensorChunk> chunks_;
  Tensor dev_;  // U8 buffer: descriptors, then chunks (16-byte aligned)
  bool stale_ = true;
  bool built_ = false;
  int64_t uploads_ = 0;
};

struct SgdHyper {
  double lr = 0.01, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  bool first_step = false;  // momentum buffer initialised to g (no dampening)
  bool zero_grad = false;   // grad = 0 after it is read
};

struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled = false;  // AdamW
  int64_t step = 1;        // t >= 1, for the bias corrections
  // CUDA only, optional: three doubles on the device, [0] = the step count
  // before this update. The launch increments it and takes the bias
  // corrections from it on the device, so a CUDA graph that replays the update
  // uses the right t every time (PyTorch's capturable Adam); `step` is then
  // unused. [1], [2]: scratch (step size, 1 / sqrt(bias correction 2)).
  double* device_step = nullptr;
  bool zero_grad = false;  // grad = 0 after it is read (the single-group form only; the
                           // multi-group launch takes one flag for all groups)
};

// Groups per multi-group Adam launch (its hyperparameter table is a kernel argument);
// nn::Optimizer splits longer lists over several launches.
constexpr int kMaxAdamGroups = 16;

// The per-element constants of one Adam group (the same on CPU and CUDA).
template <typename T>
struct AdamConsts {
  T b1, b2, omb1, omb2, eps, step_size, inv_sqrt_bc2, l2, decay;
};
// From the host step count h.step (CUDA with device_step: step_size and inv_sqrt_bc2 are
// recomputed on the device from the device count, with the same double expressions).
template <typename T>
AdamConsts<T> adam_consts(const AdamHyper& h);

// ---- CPU: one parallel pass over the chunks ---------------------------------
template <typename T>
void sgd_step_cpu(const MultiTensorDesc* descs, const MultiTensorChunk* chunks, int64_t nchunks,
                  const SgdHyper& h);
template <typename T>
void adam_step_cpu(const MultiTensorDesc* descs, const MultiTensorChunk* chunks, int64_t nchunks,
                   const AdamHyper& h);
// descs[i].group indexes groups[0..ngroups); each group's step (host count) is used.
template <typename T>
void adam_step_groups_cpu(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                          int64_t nchunks, const AdamHyper* groups, int ngroups, bool zero_grad);
// Sum of squares of all grads (accumulated in double, deterministic order).
template <typename T>
double grad_sumsq_cpu(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                      int64_t nchunks);
// grad *= scale for every tensor.
template <typename T>
void scale_grads_cpu(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                     int64_t nchunks, double scale);

#ifdef MN_WITH_CUDA
// Device tables (MultiTensorPlan::device_*), one launch each.
template <typename T>
void sgd_step_cuda(const MultiTensorDesc* descs, const MultiTensorChunk* chunks, int64_t nchunks,
                   const SgdHyper& h);
template <typename T>
void adam_step_cuda(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                    int64_t nchunks, const AdamHyper& h);
// ngroups <= kMaxAdamGroups. With device step counts (every group's device_step set,
// or none), `done` is a zeroed uint32 on the device that the blocks count on (the
// last block advances the counts and resets it); unused without them.
template <typename T>
void adam_step_groups_cuda(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                           int64_t nchunks, const AdamHyper* groups, int ngroups, bool zero_grad,
                           unsigned* done);
// *sumsq += sum of squares of all grads (double accumulator on the device).
template <typename T>
void grad_sumsq_cuda(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                     int64_t nchunks, double* sumsq);
// grad *= min(1, max_norm / (sqrt(*sumsq) + eps)), the factor read on the device.
template <typename T>
void clip_scale_cuda(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                     int64_t nchunks, const double* sumsq, double max_norm, double eps);
#endif

// ---- dispatch (dtype F32/F64, device from `device`) -------------------------
void fused_sgd_step(MultiTensorPlan& plan, DType dtype, Device device, const SgdHyper& h);
void fused_adam_step(MultiTensorPlan& plan, DType dtype, Device device, const AdamHyper& h);
// One launch over every group: plan's descriptors carry `group` = the index into
// `groups`, groups.size() <= kMaxAdamGroups (nn::Optimizer batches longer lists).
// `done` (CUDA with device step counts): a zeroed int32 scalar on `device`.
void fused_adam_step_groups(MultiTensorPlan& plan, DType dtype, Device device,
                            const std::vector<AdamHyper>& groups, bool zero_grad,
                            const Tensor& done = Tensor());
// Adds the sum of squared grads into `sumsq` (F64 scalar tensor on `device`).
void fused_grad_sumsq(MultiTensorPlan& plan, DType dtype, Device device, Tensor& sumsq);
// Scales grads by min(1, max_norm / (sqrt(sumsq) + eps)); sumsq as above.
void fused_clip_scale(MultiTensorPlan& plan, DType dtype, Device device, const Tensor& sumsq,
                      double max_norm, double eps);

}  // namespace mn::kernels
