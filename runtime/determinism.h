// Deterministic mode, as torch.use_deterministic_algorithms(True): when on, an op
// whose CUDA kernel accumulates with floating-point atomics (whose order, and so
// whose last bits, vary from run to run) refuses to run and says so, instead of
// quietly making two runs differ. Everything else is deterministic already: the
// CPU kernels reduce in a fixed order for a given thread count, and the CUDA
// convolutions (split-K summed in order), GEMMs, distances, dense losses, miners
// and optimizers use no atomics -- two H200 runs of the Koch training step gave
// bit-identical weights (tests/nn/test_train_step_parity.cpp). The cost is
// therefore no slower kernel, only the refusals:
//   index_add, scatter_add (the backward of index_select / gather), the gradient
//   of losses over mined (indexed) tuples, gradient-norm clipping (its sum of
//   squares) -- on CUDA devices.
// Off by default; on with set_deterministic(true), MN_DETERMINISTIC=1, or a
// study's --deterministic.
#pragma once

namespace mn {

void set_deterministic(bool on);
bool deterministic();
// Throws mn::Error naming `op` and what makes it non-deterministic (`why`) when
// deterministic mode is on. Called on the host before the launch.
void check_deterministic(const char* op, const char* why);

}  // namespace mn
