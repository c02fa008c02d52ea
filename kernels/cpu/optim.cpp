// CPU side of the fused optimizer kernels (kernels/optim.h): the multi-tensor
// plan (host tables + cached device copy), the CPU updates as one parallel pass
// over the chunk table, and the dtype/device dispatchers.
#include "kernels/optim.h"

#include <cmath>
#include <cstring>

#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace mn::kernels {

// ---- plan --------------------------------------------------------------------

bool MultiTensorPlan::set(const std::vector<MultiTensorDesc>& descs) {
  if (built_ && descs == descs_) return false;
  built_ = true;
  descs_ = descs;
  chunks_.clear();
  for (size_t i = 0; i < descs_.size(); ++i) {
    for (int64_t s = 0; s < descs_[i].numel; s += kMultiTensorChunk)
      chunks_.push_back({static_cast<int64_t>(i), s});
  }
  stale_ = true;
  return true;
}

void MultiTensorPlan::upload(Device device) {
  const size_t desc_bytes = descs_.size() * sizeof(MultiTensorDesc);
  const size_t chunk_off = (desc_bytes + 15) / 16 * 16;
  const size_t total = chunk_off + chunks_.size() * sizeof(MultiTensorChunk);
  std::vector<uint8_t> host(total == 0 ? 16 : total, 0);
  if (desc_bytes) std::memcpy(host.data(), descs_.data(), desc_bytes);
  if (!chunks_.empty())
    std::memcpy(host.data() + chunk_off, chunks_.data(), chunks_.size() * sizeof(MultiTensorChunk));
  // Reuse the cached buffer when it is large enough and on the right device.
  if (dev_.defined() && dev_.device() == device && static_cast<size_t>(dev_.numel()) >= host.size()) {
    Tensor src = Tensor::from_host(host.data(), {static_cast<int64_t>(host.size())}, DType::U8);
    dev_.narrow(0, 0, static_cast<int64_t>(host.size())).copy_(src);
  } else {
    dev_ = Tensor::from_host(host.data(), {static_cast<int64_t>(host.size())}, DType::U8, device);
  }
  stale_ = false;
  ++uploads_;
}

const MultiTensorDesc* MultiTensorPlan::device_descs(Device device) {
  if (stale_ || !dev_.defined() || dev_.device() != device) upload(device);
  return reinterpret_cast<const MultiTensorDesc*>(dev_.raw_data());
}

const MultiTensorChunk* MultiTensorPlan::device_chunks(Device device) {
  if (stale_ || !dev_.defined() || dev_.device() != device) upload(device);
  const size_t desc_bytes = descs_.size() * sizeof(MultiTensorDesc);
  const size_t chunk_off = (desc_bytes + 15) / 16 * 16;
  return reinterpret_cast<const MultiTensorChunk*>(static_cast<const uint8_t*>(dev_.raw_data()) +
                                                   chunk_off);
}

// ---- CPU kernels ---------------------------------------------------------------

namespace {
// Chunks are 8192 elements: one chunk is already worth a task.
constexpr int64_t kChunkGrain = 4;
}  // namespace

template <typename T>
void sgd_step_cpu(const MultiTensorDesc* descs, const MultiTensorChunk* chunks, int64_t nchunks,
                  const SgdHyper& h) {
  const T lr = static_cast<T>(h.lr), mom = static_cast<T>(h.momentum),
          wd = static_cast<T>(h.weight_decay);
  const T damp1 = h.first_step ? T(1) : static_cast<T>(1.0 - h.dampening);
  const bool use_mom = h.momentum != 0.0;
  const bool first = h.first_step;
  parallel_for(0, nchunks, kChunkGrain, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const MultiTensorDesc& d = descs[chunks[c].tensor];
      const int64_t s = chunks[c].start;
      const int64_t e = std::min(d.numel, s + kMultiTensorChunk);
      T* p = static_cast<T*>(d.param);
      T* g = static_cast<T*>(d.grad);
      T* buf = static_cast<T*>(d.state0);
      for (int64_t i = s; i < e; ++i) {
        T gi = g[i] + wd * p[i];
        if (h.zero_grad) g[i] = T(0);
        if (use_mom) {
          T b = first ? gi : mom * buf[i] + damp1 * gi;
          buf[i] = b;
          gi = h.nesterov ? gi + mom * b : b;
        }
        p[i] -= lr * gi;
      }
    }
  });
}

template <typename T>
AdamConsts<T> adam_consts(const AdamHyper& h) {
  const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  AdamConsts<T> c;
  c.b1 = static_cast<T>(h.beta1), c.b2 = static_cast<T>(h.beta2);
  c.omb1 = static_cast<T>(1.0 - h.beta1), c.omb2 = static_cast<T>(1.0 - h.beta2);
  c.eps = static_cast<T>(h.eps);
  c.step_size = static_cast<T>(h.lr / bc1);
  c.inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(bc2));
  c.l2 = h.decoupled ? T(0) : static_cast<T>(h.weight_decay);
  c.decay = h.decoupled ? static_cast<T>(1.0 - h.lr * h.weight_decay) : T(1);
  return c;
}

namespace {
// Elements [s, e) of one tensor (the loop of every Adam form, CPU and CUDA alike).
template <typename T>
void adam_range(const MultiTensorDesc& d, int64_t s, int64_t e, const AdamConsts<T>& c,
                bool zero_grad) {
  T* p = static_cast<T*>(d.param);
  T* g = static_cast<T*>(d.grad);
  T* m = static_cast<T*>(d.state0);
  T* v = static_cast<T*>(d.state1);
  for (int64_t i = s; i < e; ++i) {
    const T gi = g[i] + c.l2 * p[i];
    if (zero_grad) g[i] = T(0);
    const T mi = c.b1 * m[i] + c.omb1 * gi;
    const T vi = c.b2 * v[i] + c.omb2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * c.decay - c.step_size * mi / (std::sqrt(vi) * c.inv_sqrt_bc2 + c.eps);
  }
}
}  // namespace

template <typename T>
void adam_step_cpu(const MultiTensorDesc* descs, const MultiTensorChunk* chunks, int64_t nchunks,
                   const AdamHyper& h) {
  const AdamConsts<T> c = adam_consts<T>(h);
  parallel_for(0, nchunks, kChunkGrain, [&](int64_t c0, int64_t c1) {
    for (int64_t k = c0; k < c1; ++k) {
      const MultiTensorDesc& d = descs[chunks[k].tensor];
      const int64_t s = chunks[k].start;
      adam_range<T>(d, s, std::min(d.numel, s + kMultiTensorChunk), c, h.zero_grad);
    }
  });
}

template <typename T>
void adam_step_groups_cpu(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                          int64_t nchunks, const AdamHyper* groups, int ngroups, bool zero_grad) {
  std::vector<AdamConsts<T>> c;
  for (int k = 0; k < ngroups; ++k) c.push_back(adam_consts<T>(groups[k]));
  for (int64_t k = 0; k < nchunks; ++k) {
    const int64_t gi = descs[chunks[k].tensor].group;
    MN_CHECK(gi >= 0 && gi < ngroups, "adam_step_groups: descriptor ", chunks[k].tensor,
             " names group ", gi, " of ", ngroups);
  }
  parallel_for(0, nchunks, kChunkGrain, [&](int64_t c0, int64_t c1) {
    for (int64_t k = c0; k < c1; ++k) {
      const MultiTensorDesc& d = descs[chunks[k].tensor];
      const int64_t s = chunks[k].start;
      adam_range<T>(d, s, std::min(d.numel, s + kMultiTensorChunk), c[size_t(d.group)], zero_grad);
    }
  });
}

template <typename T>
double grad_sumsq_cpu(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                      int64_t nchunks) {
  std::vector<double> partial(static_cast<size_t>(nchunks), 0.0);
  parallel_for(0, nchunks, kChunkGrain, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const MultiTensorDesc& d = descs[chunks[c].tensor];
      const int64_t s = chunks[c].start;
      const int64_t e = std::min(d.numel, s + kMultiTensorChunk);
      const T* g = static_cast<const T*>(d.grad);
      double acc = 0.0;
      for (int64_t i = s; i < e; ++i) acc += static_cast<double>(g[i]) * static_cast<double>(g[i]);
      partial[c] = acc;
    }
  });
  double total = 0.0;
  for (double x : partial) total += x;  // fixed order: deterministic across thread counts
  return total;
}

template <typename T>
void scale_grads_cpu(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                     int64_t nchunks, double scale) {
  const T sc = static_cast<T>(scale);
  parallel_for(0, nchunks, kChunkGrain, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const MultiTensorDesc& d = descs[chunks[c].tensor];
      const int64_t s = chunks[c].start;
      const int64_t e = std::min(d.numel, s + kMultiTensorChunk);
      T* g = static_cast<T*>(d.grad);
      for (int64_t i = s; i < e; ++i) g[i] *= sc;
    }
  });
}

#define MN_INSTANTIATE_OPTIM(T)                                                              \
  template void sgd_step_cpu<T>(const MultiTensorDesc*, const MultiTensorChunk*, int64_t,   \
                                const SgdHyper&);                                           \
  template void adam_step_cpu<T>(const MultiTensorDesc*, const MultiTensorChunk*, int64_t,  \
                                 const AdamHyper&);                                         \
  template void adam_step_groups_cpu<T>(const MultiTensorDesc*, const MultiTensorChunk*,    \
                                        int64_t, const AdamHyper*, int, bool);               \
  template AdamConsts<T> adam_consts<T>(const AdamHyper&);                                   \
  template double grad_sumsq_cpu<T>(const MultiTensorDesc*, const MultiTensorChunk*, int64_t); \
  template void scale_grads_cpu<T>(const MultiTensorDesc*, const MultiTensorChunk*, int64_t, \
                                   double);
MN_INSTANTIATE_OPTIM(float)
MN_INSTANTIATE_OPTIM(double)
#undef MN_INSTANTIATE_OPTIM

// ---- dispatch --------------------------------------------------------------------

void fused_sgd_step(MultiTensorPlan& plan, DType dtype, Device device, const SgdHyper& h) {
  if (plan.empty()) return;
  MN_DISPATCH_FLOAT(dtype, "fused_sgd_step", [&] {
    if (device.is_cuda()) {
      MN_CUDA_BRANCH("fused_sgd_step", device, dtype, {
        sgd_step_cuda<scalar_t>(plan.device_descs(device), plan.device_chunks(device),
                                plan.num_chunks(), h);
      });
    } else {
      sgd_step_cpu<scalar_t>(plan.descs().data(), plan.chunks().data(), plan.num_chunks(), h);
    }
  });
}

void fused_adam_step(MultiTensorPlan& plan, DType dtype, Device device, const AdamHyper& h) {
  if (plan.empty()) return;
  MN_DISPATCH_FLOAT(dtype, "fused_adam_step", [&] {
    if (device.is_cuda()) {
      MN_CUDA_BRANCH("fused_adam_step", device, dtype, {
        adam_step_cuda<scalar_t>(plan.device_descs(device), plan.device_chunks(device),
                                 plan.num_chunks(), h);
      });
    } else {
      adam_step_cpu<scalar_t>(plan.descs().data(), plan.chunks().data(), plan.num_chunks(), h);
    }
  });
}

void fused_adam_step_groups(MultiTensorPlan& plan, DType dtype, Device device,
                            const std::vector<AdamHyper>& groups, bool zero_grad,
                            const Tensor& done) {
  const int n = static_cast<int>(groups.size());
  MN_CHECK(n >= 1 && n <= kMaxAdamGroups, "fused_adam_step_groups: ", n,
           " groups, one launch takes 1 to ", kMaxAdamGroups);
  for (size_t i = 0; i < plan.descs().size(); ++i)  // the kernels index their table with it
    MN_CHECK(plan.descs()[i].group >= 0 && plan.descs()[i].group < n, "fused_adam_step_groups: "
             "descriptor ", i, " names group ", plan.descs()[i].group, " of ", n);
  if (plan.empty()) return;
  MN_DISPATCH_FLOAT(dtype, "fused_adam_step_groups", [&] {
    if (device.is_cuda()) {
      const bool counts = groups[0].device_step != nullptr;
      for (const AdamHyper& h : groups)
        MN_CHECK((h.device_step != nullptr) == counts, "fused_adam_step_groups: every group or "
                 "none must count its steps on the device");
      MN_CHECK(!counts || (done.defined() && done.dtype() == DType::I32 && done.numel() == 1 &&
                           done.device() == device),
               "fused_adam_step_groups: device step counts need a zeroed int32 scalar on ",
               device.str(), " to count the blocks, got ",
               done.defined() ? done.desc() : std::string("undefined"));
      MN_CUDA_BRANCH("fused_adam_step_groups", device, dtype, {
        adam_step_groups_cuda<scalar_t>(plan.device_descs(device), plan.device_chunks(device),
                                        plan.num_chunks(), groups.data(), n, zero_grad,
                                        counts ? reinterpret_cast<unsigned*>(done.raw_data()) : nullptr);
      });
    } else {
      adam_step_groups_cpu<scalar_t>(plan.descs().data(), plan.chunks().data(), plan.num_chunks(),
                                     groups.data(), n, zero_grad);
    }
  });
}

void fused_grad_sumsq(MultiTensorPlan& plan, DType dtype, Device device, Tensor& sumsq) {
  MN_CHECK(sumsq.defined() && sumsq.dtype() == DType::F64 && sumsq.numel() == 1 &&
               sumsq.device() == device,
           "fused_grad_sumsq: accumulator must be a float64 scalar on ", device.str(), ", got ",
           sumsq.defined() ? sumsq.desc() : std::string("undefined"));
  if (plan.empty()) return;
  MN_DISPATCH_FLOAT(dtype, "fused_grad_sumsq", [&] {
    if (device.is_cuda()) {
      MN_CUDA_BRANCH("fused_grad_sumsq", device, dtype, {
        grad_sumsq_cuda<scalar_t>(plan.device_descs(device), plan.device_chunks(device),
                                  plan.num_chunks(), sumsq.data<double>());
      });
    } else {
      *sumsq.data<double>() +=
          grad_sumsq_cpu<scalar_t>(plan.descs().data(), plan.chunks().data(), plan.num_chunks());
    }
  });
}

void fused_clip_scale(MultiTensorPlan& plan, DType dtype, Device device, const Tensor& sumsq,
                      double max_norm, double eps) {
  MN_CHECK(sumsq.defined() && sumsq.dtype() == DType::F64 && sumsq.numel() == 1 &&
               sumsq.device() == device,
           "fused_clip_scale: sum of squares must be a float64 scalar on ", device.str());
  if (plan.empty()) return;
  MN_DISPATCH_FLOAT(dtype, "fused_clip_scale", [&] {
    if (device.is_cuda()) {
      MN_CUDA_BRANCH("fused_clip_scale", device, dtype, {
        clip_scale_cuda<scalar_t>(plan.device_descs(device), plan.device_chunks(device),
                                  plan.num_chunks(), sumsq.data<double>(), max_norm, eps);
      });
    } else {
      const double coef = max_norm / (std::sqrt(*sumsq.data<double>()) + eps);
      if (coef < 1.0)
        scale_grads_cpu<scalar_t>(plan.descs().data(), plan.chunks().data(), plan.num_chunks(),
                                  coef);
    }
  });
}

}  // namespace mn::kernels
