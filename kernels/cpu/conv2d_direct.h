// Internal: the vectorised direct convolution of kernels/cpu/conv2d_direct_avx2.cpp,
// used by kernels/cpu/conv2d.cpp for stride-1 float convolutions on small images
// (see that file for when). Included by those two sources and by
// tests/kernels/test_conv2d.cpp, which runs the kernels on shapes the dispatch
// does not send to them.
//
// A stride-1, dilation-1 cross-correlation
//   y[n, o, p, q] = bias[o] + sum_{i, r, s} w[o, i, r, s] * x[n, i, p - ph + r, q - pw + s]
// with x (N, Ci, H, W) zero-padded by (ph, pw) and y (N, Co, P, Q),
// P = H + 2 ph - R + 1, Q = W + 2 pw - S + 1. The weights come packed by
// pack_direct_weights: blocks of 16 output channels (the last one zero-filled
// past Co), each (Ci * R * S, 16), so that one step of the reduction loads two
// vectors of 8 output channels.
#pragma once
#include <cstdint>

namespace mn::kernels::detail {

struct DirectConv {
  int64_t N, Ci, H, W;  // input
  int64_t Co, R, S;     // output channels, kernel
  int64_t ph, pw;       // zero padding (each <= kernel size - 1)
  int64_t P() const { return H + 2 * ph - R + 1; }
  int64_t Q() const { return W + 2 * pw - S + 1; }
};

constexpr int64_t kDirectBlock = 16;  // output channels per packed block

inline int64_t direct_packed_size(const DirectConv& d) {
  return (d.Co + kDirectBlock - 1) / kDirectBlock * kDirectBlock * d.Ci * d.R * d.S;
}

// wp[(ob * Ci*R*S + (i*R + r)*S + s) * 16 + lane] = weight(o = ob*16 + lane, i, r, s), 0 past Co.
// weight(o, i, r, s) is read through `at`, so the same packing serves the
// forward weights and backward-data's flipped, transposed ones.
template <typename F>
void pack_direct_weights(const DirectConv& d, float* wp, F&& at) {
  const int64_t blocks = (d.Co + kDirectBlock - 1) / kDirectBlock;
  for (int64_t ob = 0; ob < blocks; ++ob)
    for (int64_t i = 0; i < d.Ci; ++i)
      for (int64_t r = 0; r < d.R; ++r)
        for (int64_t s = 0; s < d.S; ++s)
          for (int64_t lane = 0; lane < kDirectBlock; ++lane) {
            const int64_t o = ob * kDirectBlock + lane;
            *wp++ = o < d.Co ? at(o, i, r, s) : 0.0f;
          }
}

// y = the correlation above (y overwritten; bias may be null). Requires Co % 8 == 0
// and the AVX2 + FMA path (cpu_isa() >= Avx2). Parallel over images (and over
// blocks of output channels when there are fewer images than threads); every
// output is one sum in a fixed order, so the result does not depend on the
// number of threads.
void direct_conv_avx2(const DirectConv& d, const float* x, const float* wp, const float* bias,
                      float* y);

// dw (Co, Ci, R, S) = the weight gradient of that correlation given x and
// dy (N, Co, P, Q) (overwritten). Same requirements; thread-count independent.
void direct_conv_weight_avx2(const DirectConv& d, const float* x, const float* dy, float* dw);

// Backward-data by scatter (tap by tap), with weights packed by
// pack_direct_data_weights: blocks of 16 input channels (the last one
// zero-filled past Ci), each (R, S, Co, 16), so that one step of the reduction
// over o loads the 16 weights w[o, c0..c0+15, r, s] of one tap as two vectors.
inline int64_t direct_data_packed_size(const DirectConv& d) {
  return (d.Ci + kDirectBlock - 1) / kDirectBlock * kDirectBlock * d.R * d.S * d.Co;
}

// wpT[(((cb * R + r) * S + s) * Co + o) * 16 + lane] = w[o, c = cb*16 + lane, r, s], 0 past Ci;
// w (Co, Ci, R, S), the forward weights.
inline void pack_direct_data_weights(const DirectConv& d, const float* w, float* wpT) {
  const int64_t blocks = (d.Ci + kDirectBlock - 1) / kDirectBlock;
  for (int64_t cb = 0; cb < blocks; ++cb)
    for (int64_t r = 0; r < d.R; ++r)
      for (int64_t s = 0; s < d.S; ++s)
        for (int64_t o = 0; o < d.Co; ++o)
          for (int64_t lane = 0; lane < kDirectBlock; ++lane) {
            const int64_t c = cb * kDirectBlock + lane;
            *wpT++ = c < d.Ci ? w[((o * d.Ci + c) * d.R + r) * d.S + s] : 0.0f;
          }
}

// dx (N, Ci, H, W) = the input gradient of that correlation given dy (N, Co, P, Q)
// (overwritten):
//   dx[n, c, p - ph + r, q - pw + s] += sum_o w[o, c, r, s] * dy[n, o, p, q]
// Any Ci and Co (Ci % 8 != 0 wastes the unused lanes of the last block);
// padding 0 <= ph < R, 0 <= pw < S; the AVX2 + FMA path. Parallel over images
// (and over blocks of input channels when there are fewer images than
// threads); every dx element is one sum in a fixed order (tap by tap, r then s,
// each tap over o), so the result does not depend on the number of threads.
void direct_conv_data_avx2(const DirectConv& d, const float* dy, const float* wpT, float* dx);

}  // namespace mn::kernels::detail
