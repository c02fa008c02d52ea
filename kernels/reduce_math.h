// The accumulator of the reductions, shared by kernels/cpu/reduce.cpp and
// kernels/cuda/reduce.cu: a double value plus an int64 index. Sum/Mean add;
// Max/Min keep the extreme value, ties going to the smaller index and NaN
// winning over numbers (so it propagates). Internal to kernels/.
#pragma once
#include <cstdint>

#include "kernels/reduce.h"
#include "runtime/strided.h"

namespace mn::kernels::detail {

struct RedAcc {
  double v;
  int64_t i;
};

template <ReduceOp OP>
MN_HD RedAcc red_identity() {
  if constexpr (OP == ReduceOp::Max) return {-__builtin_huge_val(), INT64_MAX};
  if constexpr (OP == ReduceOp::Min) return {__builtin_huge_val(), INT64_MAX};
  return {0.0, 0};
}

template <ReduceOp OP>
MN_HD void red_combine(RedAcc& a, double v, int64_t i) {
  if constexpr (OP == ReduceOp::Sum || OP == ReduceOp::Mean) {
    a.v += v;
    (void)i;
  } else {
    const bool a_nan = a.v != a.v, v_nan = v != v;
    bool take;
    if (a_nan || v_nan) take = v_nan && (!a_nan || i < a.i);
    else if (OP == ReduceOp::Max) take = v > a.v || (v == a.v && i < a.i);
    else take = v < a.v || (v == a.v && i < a.i);
    if (take) { a.v = v; a.i = i; }
  }
}

}  // namespace mn::kernels::detail
