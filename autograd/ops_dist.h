// Differentiable collectives for data-parallel training (runtime/comm.h).
//
// all_gather_rows: each rank's (n, ...) rows -> the (size * n, ...) rows of every
// rank in rank order, so a miner and a loss see the global batch. Its backward is
// the adjoint of the gather for a sum over ranks of each rank's loss: the
// reduce-scatter of the output gradient (rank r gets the sum over ranks of the
// gradient of its own rows). When every rank computes the same global loss L (a
// replicated miner + loss), rank r's rows thus get size * dL/d(rows of r); the
// gradient reducer's average over ranks (nn/distributed.h) divides it back, so the
// step is exactly the one-process step on the global batch (to float rounding).
#pragma once
#include "autograd/variable.h"
#include "runtime/comm.h"

namespace mn::ag {

// x (n, ...) on comm.device() -> (comm.size() * n, ...); every rank calls it with the same shape.
Variable all_gather_rows(const Variable& x, Communicator& comm);

// v -> the sum over ranks of v, on every rank (v's shape must agree across ranks). Its
// backward is the sum over ranks of the output gradient: the adjoint for a sum over
// ranks of each rank's loss, as for all_gather_rows.
Variable all_reduce_sum(const Variable& v, Communicator& comm);

// Batch normalisation in training mode with the statistics of every rank's rows
// (PyTorch's SyncBatchNorm): per channel (dim 1 of x (N, C, ...)), the global mean
// first, then the global biased variance of x - mean (two all-reduces of C values,
// and one of the row count, which may differ between ranks); y = (x - mean) /
// sqrt(var + eps) * gamma + beta (gamma, beta (C) or both undefined). The running
// statistics (when defined) are updated as kernels/batchnorm.h's, with the global
// unbiased variance, identically on every rank. Gradients flow through the
// statistics to every rank's rows (all_reduce_sum). Composite ops: slower than
// batch_norm's fused kernel; for data-parallel runs whose per-rank batches are small.
Variable sync_batch_norm(const Variable& x, const Variable& gamma, const Variable& beta, Tensor running_mean,
                         Tensor running_var, double momentum, double eps, Communicator& comm);

}  // namespace mn::ag
