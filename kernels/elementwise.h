// Elementwise ops: unary (neg, exp, log, sqrt, abs, square, pow, clamp, sigmoid,
// tanh), binary with NumPy broadcasting (add, sub, mul, div, maximum, minimum),
// and binary ops with a scalar, each with forward and backward, on the CPU
// (float/double, multithreaded) and CUDA (float/double).
//
// Two paths per binary op: a fast one for contiguous operands of the same shape
// and a general one where each operand is read through a StridedIndexer
// (runtime/strided.h) broadcast to the output shape (stride 0 = broadcast).
// Backward kernels write gradients in the OUTPUT shape; sum_to_shape (reduce.h)
// then undoes the broadcasting.
#pragma once
#include <cstdint>
#include <utility>

#include "runtime/strided.h"
#include "runtime/tensor.h"

namespace mn::kernels {

enum class UnaryOp : int { Neg, Exp, Log, Sqrt, Abs, Square, Pow, Clamp, Sigmoid, Tanh };
// Binary ops. Maximum/Minimum backward: the gradient goes to the larger
// (smaller) operand; on a tie it is split half/half (a subgradient).
enum class BinaryOp : int { Add, Sub, Mul, Div, Maximum, Minimum };

const char* unary_name(UnaryOp op);
const char* binary_name(BinaryOp op);
// Which saved tensors a unary backward reads: the input x (log, abs, square,
// pow, clamp), the output y (exp, sqrt, sigmoid, tanh), or neither (neg).
bool unary_backward_needs_input(UnaryOp op);
bool unary_backward_needs_output(UnaryOp op);

// ---- raw kernels ------------------------------------------------------------
// p0, p1: the op's parameters (pow: exponent p0; clamp: [p0, p1]); unused otherwise.
template <typename T>
void unary_forward_cpu(UnaryOp op, int64_t n, const T* x, T* y, T p0, T p1);  // x, y: (n)
// gx = dy * f'(x); x or y may be null when the op does not need it (see above).
template <typename T>
void unary_backward_cpu(UnaryOp op, int64_t n, const T* gy, const T* x, const T* y, T* gx, T p0,
                        T p1);  // all (n)

// out = a (op) b, all contiguous (n).
template <typename T>
void binary_forward_cpu(BinaryOp op, int64_t n, const T* a, const T* b, T* out);
// out (contiguous, `out_shape` with numel n) = a[ia] (op) b[ib]; ia/ib map the
// linear output index to element offsets of a and b (broadcast strides).
template <typename T>
void binary_forward_strided_cpu(BinaryOp op, int64_t n, const T* a, const StridedIndexer& ia,
                                const T* b, const StridedIndexer& ib, T* out);
// ga, gb (contiguous, output shape, either may be null) = d(out)/d(a), d(out)/d(b) * g.
template <typename T>
void binary_backward_strided_cpu(BinaryOp op, int64_t n, const T* g, const T* a,
                                 const StridedIndexer& ia, const T* b, const StridedIndexer& ib,
                                 T* ga, T* gb);
// out = x (op) s, or s (op) x when scalar_left; x, out: (n).
template <typename T>
void binary_scalar_cpu(BinaryOp op, int64_t n, const T* x, T s, bool scalar_left, T* out);

#ifdef MN_WITH_CUDA
// Same contracts, device pointers, queued on mn::cuda::stream().
template <typename T>
void unary_forward_cuda(UnaryOp op, int64_t n, const T* x, T* y, T p0, T p1);
template <typename T>
void unary_backward_cuda(UnaryOp op, int64_t n, const T* gy, const T* x, const T* y, T* gx, T p0,
                         T p1);
template <typename T>
void binary_forward_cuda(BinaryOp op, int64_t n, const T* a, const T* b, T* out);
template <typename T>
void binary_forward_strided_cuda(BinaryOp op, int64_t n, const T* a, const StridedIndexer& ia,
                                 const T* b, const StridedIndexer& ib, T* out);
template <typename T>
void binary_backward_strided_cuda(BinaryOp op, int64_t n, const T* g, const T* a,
                                  const StridedIndexer& ia, const T* b, const StridedIndexer& ib,
                                  T* ga, T* gb);
template <typename T>
void binary_scalar_cuda(BinaryOp op, int64_t n, const T* x, T s, bool scalar_left, T* out);
#endif

// ---- Tensor level (float32/float64, CPU or CUDA; results are new contiguous tensors) ----
Tensor unary(UnaryOp op, const Tensor& x, double p0 = 0, double p1 = 0);
// grad_in = grad_out * f'(x). Pass x and/or y as unary_backward_needs_* says
// (the other may be an undefined Tensor).
Tensor unary_backward(UnaryOp op, const Tensor& grad_out, const Tensor& x, const Tensor& y,
                      double p0 = 0, double p1 = 0);

inline Tensor neg(const Tensor& x) { return unary(UnaryOp::Neg, x); }
inline Tensor exp(const Tensor& x) { return unary(UnaryOp::Exp, x); }
inline Tensor log(const Tensor& x) { return unary(UnaryOp::Log, x); }
inline Tensor sqrt(const Tensor& x) { return unary(UnaryOp::Sqrt, x); }
inline Tensor abs(const Tensor& x) { return unary(UnaryOp::Abs, x); }
inline Tensor square(const Tensor& x) { return unary(UnaryOp::Square, x); }
inline Tensor pow(const Tensor& x, double exponent) { return unary(UnaryOp::Pow, x, exponent); }
inline Tensor clamp(const Tensor& x, double lo, double hi) { return unary(UnaryOp::Clamp, x, lo, hi); }
inline Tensor sigmoid(const Tensor& x) { return unary(UnaryOp::Sigmoid, x); }
inline Tensor tanh(const Tensor& x) { return unary(UnaryOp::Tanh, x); }

// a (op) b with NumPy broadcasting; same dtype and device, else mn::Error
// naming the op with both shapes.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
// Gradients of a (op) b in the BROADCAST output shape (not yet reduced):
// {ga, gb}; an entry is undefined when its need_* flag is false.
std::pair<Tensor, Tensor> binary_backward(BinaryOp op, const Tensor& grad_out, const Tensor& a,
                                          const Tensor& b, bool need_a = true, bool need_b = true);
// x (op) s, or s (op) x when scalar_left.
Tensor binary_scalar(BinaryOp op, const Tensor& x, double s, bool scalar_left = false);

inline Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Add, a, b); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Sub, a, b); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
inline Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }
inline Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Maximum, a, b); }
inline Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Minimum, a, b); }
inline Tensor add_scalar(const Tensor& x, double s) { return binary_scalar(BinaryOp::Add, x, s); }
inline Tensor mul_scalar(const Tensor& x, double s) { return binary_scalar(BinaryOp::Mul, x, s); }

}  // namespace mn::kernels
