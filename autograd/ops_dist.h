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

}  // namespace mn::ag
