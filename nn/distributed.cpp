// Data-parallel gradient reduction (nn/distributed.h).
#include "nn/distributed.h"

#include "kernels/elementwise.h"
#include "nn/layers/batchnorm.h"

namespace mn::nn {

int64_t sync_batch_norms(Module& model, Communicator* comm) {
  int64_t n = 0;
  if (auto* bn = dynamic_cast<BatchNorm*>(&model)) {
    bn->sync_with(comm);
    ++n;
  }
  for (auto& [name, child] : model.named_children()) n += sync_batch_norms(*child, comm);
  return n;
}

DataParallel::DataParallel(Module& model, Communicator& comm, DataParallelOptions o)
    : model_(model), comm_(comm), opt_(o) {
  MN_CHECK(opt_.bucket_bytes > 0, "DataParallel: bucket_bytes must be positive, got ", opt_.bucket_bytes);
  params_ = model_.parameters();
  MN_CHECK(!params_.empty(), "DataParallel: the model has no parameters");
  for (const auto& p : params_)
    MN_CHECK(p.device() == comm_.device(), "DataParallel: parameter ", p.data().desc(), " is on ", p.device().str(),
             " but the ", comm_.backend(), " communicator takes ", comm_.device().str(), " tensors (",
             comm_.device().is_cpu() ? "MPI for CPU runs" : "NCCL for GPU runs", ")");
  build_buckets();
}

DataParallel::~DataParallel() = default;

void DataParallel::build_buckets() {
  // Reverse registration order: the last layers' gradients are complete first.
  Bucket cur;
  int64_t cur_bytes = 0;
  DType cur_dtype = params_.back().dtype();
  auto close = [&] {
    if (cur.params.empty()) return;
    const int64_t n = cur.offsets.back() + params_[cur.params.back()].numel();
    cur.flat = Tensor::zeros({n}, cur_dtype, comm_.device());
    cur.got.assign(cur.params.size(), false);
    buckets_.push_back(std::move(cur));
    cur = Bucket();
    cur_bytes = 0;
  };
  for (size_t k = params_.size(); k-- > 0;) {
    const Variable& p = params_[k];
    const int64_t b = p.numel() * static_cast<int64_t>(dtype_size(p.dtype()));
    if (!cur.params.empty() && (p.dtype() != cur_dtype || cur_bytes + b > opt_.bucket_bytes)) close();
    cur_dtype = p.dtype();
    cur.offsets.push_back(cur.params.empty() ? 0 : cur.offsets.back() + params_[cur.params.back()].numel());
    where_[p.id()] = {buckets_.size(), cur.params.size()};
    cur.params.push_back(k);
    cur_bytes += b;
    bytes_ += b;
  }
  close();
}

void DataParallel::broadcast_from(int root) {
  for (auto& p : params_) {
    Tensor t = p.data().contiguous();
    comm_.broadcast(t, root);
    if (!t.shares_storage(p.data())) p.set_data(t);
  }
  for (auto& [name, b] : model_.named_buffers()) {
    if (!b->defined() || (b->dtype() != DType::F32 && b->dtype() != DType::F64)) continue;
    Tensor t = b->contiguous();
    comm_.broadcast(t, root);
    if (!t.shares_storage(*b)) *b = t;
  }
}

// A parameter's gradient is complete: copy it into its bucket, start what is ready.
void DataParallel::on_leaf(const Variable& leaf) {
  auto w = where_.find(leaf.id());
  if (w == where_.end()) return;  // not one of the model's parameters (e.g. an input)
  Bucket& b = buckets_[w->second.first];
  const size_t slot = w->second.second;
  if (b.got[slot] || !leaf.has_grad()) return;
  b.flat.narrow(0, b.offsets[slot], leaf.numel()).copy_(leaf.grad().reshape({leaf.numel()}));
  b.got[slot] = true;
  ++b.ready;
  if (opt_.overlap) launch_ready(false);
  // Let the engine progress the collectives already started (MPI progresses inside its calls).
  for (size_t i = 0; i < next_launch_; ++i)
    if (buckets_[i].request) buckets_[i].request->test();
}

// Starts buckets in order: each once all its gradients are in (or every remaining one when `all`).
void DataParallel::launch_ready(bool all) {
  while (next_launch_ < buckets_.size()) {
    Bucket& b = buckets_[next_launch_];
    if (!all && b.ready < b.params.size()) return;
    for (size_t s = 0; s < b.params.size(); ++s) {
      if (b.got[s]) continue;
      // Not reached by this backward on this rank: the gradient it holds (accumulated
      // before, DDP's semantics), zeros when it holds none.
      const Variable& p = params_[b.params[s]];
      Tensor dst = b.flat.narrow(0, b.offsets[s], p.numel());
      if (p.has_grad()) dst.copy_(p.grad().reshape({p.numel()}));
      else dst.zero_();
    }
    b.request = comm_.all_reduce_async(b.flat, ReduceOp::Sum);
    ++next_launch_;
  }
}

// Per parameter: whether some rank holds a gradient for it (the max over ranks of a
// has-gradient mask; one small blocking all-reduce and a host read).
std::vector<bool> DataParallel::used_anywhere() {
  std::vector<float> mine(params_.size());
  for (size_t k = 0; k < params_.size(); ++k) mine[k] = params_[k].has_grad() ? 1.f : 0.f;
  Tensor mask = Tensor::from_vector<float>(mine, {static_cast<int64_t>(mine.size())}).to(comm_.device());
  comm_.all_reduce(mask, ReduceOp::Max);
  const std::vector<float> all = mask.to(Device::cpu()).to_vector<float>();
  std::vector<bool> used(all.size());
  for (size_t k = 0; k < all.size(); ++k) used[k] = all[k] != 0.f;
  return used;
}

void DataParallel::finish() {
  launch_ready(true);
  const std::vector<bool> used = used_anywhere();
  const double inv = 1.0 / static_cast<double>(comm_.size());
  for (Bucket& b : buckets_) {
    b.request->wait();
    b.request.reset();
    Tensor avg = kernels::mul_scalar(b.flat, inv);
    for (size_t s = 0; s < b.params.size(); ++s) {
      Variable& p = params_[b.params[s]];
      b.got[s] = false;
      if (!used[b.params[s]]) continue;  // no gradient on any rank: it keeps none
      Tensor slice = avg.narrow(0, b.offsets[s], p.numel()).view(p.shape());
      if (p.has_grad()) {
        Tensor g = p.grad();
        g.copy_(slice);
      } else {
        p.set_grad(slice.clone());
      }
    }
    b.ready = 0;
  }
  next_launch_ = 0;
}

void DataParallel::average_buffers() {
  const double inv = 1.0 / static_cast<double>(comm_.size());
  for (auto& [name, b] : model_.named_buffers()) {
    if (!b->defined() || (b->dtype() != DType::F32 && b->dtype() != DType::F64)) continue;
    Tensor t = b->contiguous().clone();
    comm_.all_reduce(t, ReduceOp::Sum);
    b->copy_(kernels::mul_scalar(t, inv));
  }
}

void DataParallel::backward(const Variable& loss) {
  if (!sync_) {  // no_sync(): accumulate locally; the next synchronised backward reduces it all
    loss.backward();
    return;
  }
  overlapped_ = 0;
  {
    ag::LeafGradHookScope hook([this](const Variable& leaf) {
      const size_t before = next_launch_;
      on_leaf(leaf);
      overlapped_ += static_cast<int64_t>(next_launch_ - before);
    });
    loss.backward();
  }
  finish();
  if (opt_.average_buffers) average_buffers();
}

}  // namespace mn::nn
