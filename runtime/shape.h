// Shapes and strides: small vectors of int64 with printing, element counts,
// contiguous strides and NumPy broadcasting.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace mn {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& s);
Shape contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);
// NumPy broadcasting of two shapes; throws naming `op` and both shapes when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Wraps a possibly negative dimension index into [0, ndim); throws when out of range.
int wrap_dim(int64_t dim, int64_t ndim, const char* op);

}  // namespace mn
