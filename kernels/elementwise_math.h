// Scalar formulas of the elementwise ops, shared by kernels/cpu/elementwise.cpp
// and kernels/cuda/elementwise.cu so that the CPU oracle and the GPU kernels
// compute exactly the same expressions. The op is a template parameter so the
// per-element switch disappears at compile time. Internal to kernels/.
#pragma once
#include <math.h>

#include <cstdint>

#include "kernels/elementwise.h"
#include "runtime/strided.h"

namespace mn::kernels::detail {

MN_HD float m_exp(float x) { return ::expf(x); }
MN_HD double m_exp(double x) { return ::exp(x); }
MN_HD float m_log(float x) { return ::logf(x); }
MN_HD double m_log(double x) { return ::log(x); }
MN_HD float m_sqrt(float x) { return ::sqrtf(x); }
MN_HD double m_sqrt(double x) { return ::sqrt(x); }
MN_HD float m_pow(float x, float p) { return ::powf(x, p); }
MN_HD double m_pow(double x, double p) { return ::pow(x, p); }
MN_HD float m_tanh(float x) { return ::tanhf(x); }
MN_HD double m_tanh(double x) { return ::tanh(x); }

template <UnaryOp OP, typename T>
MN_HD T unary_fwd(T x, T p0, T p1) {
  if constexpr (OP == UnaryOp::Neg) return -x;
  if constexpr (OP == UnaryOp::Exp) return m_exp(x);
  if constexpr (OP == UnaryOp::Log) return m_log(x);
  if constexpr (OP == UnaryOp::Sqrt) return m_sqrt(x);
  if constexpr (OP == UnaryOp::Abs) return x < T(0) ? -x : x;
  if constexpr (OP == UnaryOp::Square) return x * x;
  if constexpr (OP == UnaryOp::Pow) return m_pow(x, p0);
  if constexpr (OP == UnaryOp::Clamp) return x < p0 ? p0 : (x > p1 ? p1 : x);
  if constexpr (OP == UnaryOp::Sigmoid) {
    // Stable on both sides: never exponentiates a large positive number.
    if (x >= T(0)) return T(1) / (T(1) + m_exp(-x));
    T e = m_exp(x);
    return e / (T(1) + e);
  }
  if constexpr (OP == UnaryOp::Tanh) return m_tanh(x);
  (void)p0;
  (void)p1;
  return x;
}

// dL/dx from g = dL/dy, the input x and the output y (whichever the op needs).
template <UnaryOp OP, typename T>
MN_HD T unary_bwd(T g, T x, T y, T p0, T p1) {
  if constexpr (OP == UnaryOp::Neg) return -g;
  if constexpr (OP == UnaryOp::Exp) return g * y;
  if constexpr (OP == UnaryOp::Log) return g / x;
  if constexpr (OP == UnaryOp::Sqrt) return g * T(0.5) / y;
  if constexpr (OP == UnaryOp::Abs) return x > T(0) ? g : (x < T(0) ? -g : T(0));
  if constexpr (OP == UnaryOp::Square) return g * T(2) * x;
  if constexpr (OP == UnaryOp::Pow) return p0 == T(0) ? T(0) : g * p0 * m_pow(x, p0 - T(1));
  if constexpr (OP == UnaryOp::Clamp) return (x >= p0 && x <= p1) ? g : T(0);
  if constexpr (OP == UnaryOp::Sigmoid) return g * y * (T(1) - y);
  if constexpr (OP == UnaryOp::Tanh) return g * (T(1) - y * y);
  (void)x;
  (void)y;
  (void)p0;
  (void)p1;
  return g;
}

template <BinaryOp OP, typename T>
MN_HD T binary_fwd(T a, T b) {
  if constexpr (OP == BinaryOp::Add) return a + b;
  if constexpr (OP == BinaryOp::Sub) return a - b;
  if constexpr (OP == BinaryOp::Mul) return a * b;
  if constexpr (OP == BinaryOp::Div) return a / b;
  if constexpr (OP == BinaryOp::Maximum) return a < b ? b : a;
  if constexpr (OP == BinaryOp::Minimum) return b < a ? b : a;
  return a;
}

template <BinaryOp OP, typename T>
MN_HD void binary_bwd(T g, T a, T b, T& ga, T& gb) {
  if constexpr (OP == BinaryOp::Add) { ga = g; gb = g; }
  if constexpr (OP == BinaryOp::Sub) { ga = g; gb = -g; }
  if constexpr (OP == BinaryOp::Mul) { ga = g * b; gb = g * a; }
  if constexpr (OP == BinaryOp::Div) { ga = g / b; gb = -g * a / (b * b); }
  if constexpr (OP == BinaryOp::Maximum || OP == BinaryOp::Minimum) {
    bool a_wins = OP == BinaryOp::Maximum ? a > b : a < b;
    if (a == b) { ga = g * T(0.5); gb = g * T(0.5); }
    else if (a_wins) { ga = g; gb = T(0); }
    else { ga = T(0); gb = g; }
  }
}

}  // namespace mn::kernels::detail

// Expands BODY once per UnaryOp with `OP_` bound to a constexpr op value.
#define MN_UNARY_SWITCH(op, ...)                                                           \
  switch (op) {                                                                            \
    case ::mn::kernels::UnaryOp::Neg: { constexpr auto OP_ = ::mn::kernels::UnaryOp::Neg; __VA_ARGS__; break; } \
    case ::mn::kernels::UnaryOp::Exp: { constexpr auto OP_ = ::mn::kernels::UnaryOp::Exp; __VA_ARGS__; break; } \
    case ::mn::kernels::UnaryOp::Log: { constexpr auto OP_ = ::mn::kernels::UnaryOp::Log; __VA_ARGS__; break; } \
    case ::mn::kernels::UnaryOp::Sqrt: { constexpr auto OP_ = ::mn::kernels::UnaryOp::Sqrt; __VA_ARGS__; break; } \
    case ::mn::kernels::UnaryOp::Abs: { constexpr auto OP_ = ::mn::kernels::UnaryOp::Abs; __VA_ARGS__; break; } \
    case ::mn::kernels::UnaryOp::Square: { constexpr auto OP_ = ::mn::kernels::UnaryOp::Square; __VA_ARGS__; break; } \
    case ::mn::kernels::UnaryOp::Pow: { constexpr auto OP_ = ::mn::kernels::UnaryOp::Pow; __VA_ARGS__; break; } \
    case ::mn::kernels::UnaryOp::Clamp: { constexpr auto OP_ = ::mn::kernels::UnaryOp::Clamp; __VA_ARGS__; break; } \
    case ::mn::kernels::UnaryOp::Sigmoid: { constexpr auto OP_ = ::mn::kernels::UnaryOp::Sigmoid; __VA_ARGS__; break; } \
    case ::mn::kernels::UnaryOp::Tanh: { constexpr auto OP_ = ::mn::kernels::UnaryOp::Tanh; __VA_ARGS__; break; } \
  }

#define MN_BINARY_SWITCH(op, ...)                                                          \
  switch (op) {                                                                            \
    case ::mn::kernels::BinaryOp::Add: { constexpr auto OP_ = ::mn::kernels::BinaryOp::Add; __VA_ARGS__; break; } \
    case ::mn::kernels::BinaryOp::Sub: { constexpr auto OP_ = ::mn::kernels::BinaryOp::Sub; __VA_ARGS__; break; } \
    case ::mn::kernels::BinaryOp::Mul: { constexpr auto OP_ = ::mn::kernels::BinaryOp::Mul; __VA_ARGS__; break; } \
    case ::mn::kernels::BinaryOp::Div: { constexpr auto OP_ = ::mn::kernels::BinaryOp::Div; __VA_ARGS__; break; } \
    case ::mn::kernels::BinaryOp::Maximum: { constexpr auto OP_ = ::mn::kernels::BinaryOp::Maximum; __VA_ARGS__; break; } \
    case ::mn::kernels::BinaryOp::Minimum: { constexpr auto OP_ = ::mn::kernels::BinaryOp::Minimum; __VA_ARGS__; break; } \
  }
