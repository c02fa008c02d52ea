// Data-parallel training: one process per device, each with a replica of the
// model and its own shard of the global batch (runtime/comm.h for the engines).
//
//   mn::Communicator& comm = mn::world();           // MPI under mpirun, single otherwise
//   nn::DataParallel dp(model, comm);               // buckets the parameters
//   dp.broadcast_from(0);                           // every replica starts from rank 0's
//   ... per step: forward on this rank's rows (ag::all_gather_rows for a global miner) ...
//   dp.backward(loss);                              // grads = the average over ranks
//   opt.step(); opt.zero_grad();
//
// Buckets: the parameters in reverse registration order (roughly the order in
// which backward completes them) are packed into flat buffers of about
// bucket_bytes each (one dtype per bucket). During the backward, the tape's leaf
// hook (autograd/variable.h) reports each parameter as soon as its gradient is
// complete; its gradient is copied into its bucket, and a bucket whose parameters
// are all in starts its non-blocking all-reduce at once, in bucket order (every
// rank starts the same collectives in the same order), overlapping the rest of
// the backward. After the backward, the remaining buckets are reduced, every
// bucket is scaled by 1/size and copied back into the parameters' gradients.
//
// Gradient semantics (PyTorch DDP's, with find_unused_parameters):
//   * What is reduced is each parameter's whole gradient buffer: gradients
//     accumulate across backward calls until zero_grad(), and the average is of
//     the accumulated gradients. A parameter this backward did not reach on this
//     rank contributes the gradient it already holds (zeros when it holds none).
//   * A parameter without a gradient on every rank (unused everywhere and never
//     given one) keeps no gradient, so optimizers skip it as a 1-process run
//     would; this takes one small extra all-reduce (a has-gradient mask) and a
//     host read of it per synchronised backward.
//   * no_sync(): inside its scope backward() is the plain local backward (no
//     collective): gradient accumulation over micro-batches; the next
//     synchronised backward() averages everything accumulated.
//
// Averaging makes N ranks with b rows each step like one process with the N * b
// rows when the loss is a mean over the rows (or over tuples mined on the
// gathered global batch: ag::all_gather_rows returns size * its rows' gradient,
// which the average divides back). Float sums in another order differ in the
// last bits: equal to float rounding, not bit for bit. Batch-norm normalises each rank's rows with
// their own statistics unless sync_batch_norms() made it use the global batch's, and its
// running statistics are averaged over ranks after each step (average_buffers) so
// replicas agree.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/module.h"
#include "runtime/comm.h"

namespace mn::nn {

struct DataParallelOptions {
  int64_t bucket_bytes = int64_t{1} << 22;  // 4 MiB: ~1 M float32 gradients per collective
  bool overlap = true;                       // start buckets during the backward (false: all after it)
  bool average_buffers = true;               // average floating buffers (batch-norm statistics) each step
};

// --sync-bn: every nn::BatchNorm in `model` normalises training batches with the
// statistics of all ranks' rows (ag::sync_batch_norm); returns how many. Null: local again.
int64_t sync_batch_norms(Module& model, Communicator* comm);

class DataParallel {
 public:
  DataParallel(Module& model, Communicator& comm, DataParallelOptions o = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Every rank's parameters and floating buffers <- root's.
  void broadcast_from(int root = 0);
  // loss.backward() with the bucketed all-reduce; then every parameter's grad is
  // the average over ranks of the ranks' gradients (and buffers are averaged).
  // Inside a no_sync() scope: loss.backward() alone.
  void backward(const Variable& loss);

  // While it lives, backward() only accumulates this rank's gradients (no collective).
  class NoSync {
   public:
    explicit NoSync(DataParallel& dp) : dp_(dp), was_(dp.sync_) { dp_.sync_ = false; }
    ~NoSync() { dp_.sync_ = was_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DataParallel& dp_;
    bool was_;
  };
  // auto guard = dp.no_sync(); dp.backward(loss1); ...  (every rank must do the same)
  NoSync no_sync() { return NoSync(*this); }

  Communicator& comm() { return comm_; }
  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }
  // Bytes each rank all-reduces per step (the parameters' gradients).
  int64_t bytes_per_step() const { return bytes_; }
  // Buckets started inside the last backward (the rest started after it).
  int64_t buckets_overlapped() const { return overlapped_; }

 private:
  struct Bucket {
    std::vector<size_t> params;    // indices into params_
    std::vector<int64_t> offsets;  // element offset of each in flat
    Tensor flat;                   // (numel) gradients of the bucket's parameters
    size_t ready = 0;
    std::vector<bool> got;         // per parameter: its gradient was copied in
    std::unique_ptr<CommRequest> request;
  };
  void build_buckets();
  void on_leaf(const Variable& leaf);
  void launch_ready(bool all);
  std::vector<bool> used_anywhere();
  void finish();
  void average_buffers();

  Module& model_;
  Communicator& comm_;
  DataParallelOptions opt_;
  std::vector<Variable> params_;
  std::unordered_map<const void*, std::pair<size_t, size_t>> where_;  // param id -> (bucket, slot)
  std::vector<Bucket> buckets_;
  size_t next_launch_ = 0;
  int64_t bytes_ = 0, overlapped_ = 0;
  bool sync_ = true;
};

}  // namespace mn::nn
