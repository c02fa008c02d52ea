// Tensor: a strided view (shape, strides, offset in elements) over a shared,
// reference-counted Storage on one device. Views (view/reshape, narrow/slice,
// transpose/permute, expand, squeeze/unsqueeze) share storage and copy nothing;
// contiguous(), clone(), to() and copy_() are the operations that move bytes.
// Copies between host and device are explicit and counted (runtime/allocator.h).
#pragma once
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/shape.h"

namespace mn {

// A buffer of bytes on one device, freed through the matching allocator.
class Storage {
 public:
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined tensor; defined() is false

  // ---- construction -------------------------------------------------------
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32,
                     Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::F32, Device device = Device::cpu());
  // 0, 1, ..., n-1
  static Tensor arange(int64_t n, DType dtype = DType::I64, Device device = Device::cpu());
  // Copies `values` (numel(shape) of them) into a new tensor on `device`.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape,
                            Device device = Device::cpu());
  // Same, from raw host memory.
  static Tensor from_host(const void* src, const Shape& shape, DType dtype,
                          Device device = Device::cpu());
  static Tensor empty_like(const Tensor& t);
  static Tensor zeros_like(const Tensor& t);

  // ---- reading back ---------------------------------------------------------
  // All elements in row-major order, copied to the host (checks T against dtype).
  template <typename T>
  std::vector<T> to_vector() const;
  // All elements converted to double, row-major, copied to the host.
  std::vector<double> to_double_vector() const;
  // The single element of a one-element tensor, as double.
  double item() const;

  // ---- metadata -------------------------------------------------------------
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return numel_of(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool is_cuda() const { return device_.is_cuda(); }
  bool is_cpu() const { return device_.is_cpu(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool shares_storage(const Tensor& o) const { return storage_ && storage_ == o.storage_; }
  // "(2, 3) float32 cpu"
  std::string desc() const;

  // Pointer to the first element (at offset); checks that T matches dtype.
  template <typename T>
  T* data() const;
  void* raw_data() const;

  // ---- views (share storage) ------------------------------------------------
  // Requires a viewable layout (contiguous); one dimension may be -1.
  Tensor view(const Shape& shape) const;
  // view() when possible, otherwise a contiguous copy.
  Tensor reshape(const Shape& shape) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  // Removes dimension `dim` by picking one index.
  Tensor select(int64_t dim, int64_t index) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // 2-D transpose
  Tensor permute(const std::vector<int64_t>& order) const;
  // Broadcast to `shape` with stride 0 (NumPy rules; -1 keeps a size).
  Tensor expand(const Shape& shape) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;

  // ---- copies ---------------------------------------------------------------
  Tensor contiguous() const;  // *this when already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  Tensor to(Device device) const;  // *this when already there
  Tensor to(DType dtype) const;    // *this when already that dtype
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }
  // Copies src into *this (shapes must match, or src broadcast to this shape);
  // any devices, any dtypes (converted as by static_cast).
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(double value);
  Tensor& zero_();

  std::string str(int64_t max_per_dim = 6) const;

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::F32;
  Device device_;

  void check_defined(const char* op) const;
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

template <typename T>
T* Tensor::data() const {
  MN_CHECK(defined(), "Tensor::data: undefined tensor");
  MN_CHECK(dtype_ == dtype_of<T>, "Tensor::data: tensor ", desc(), " accessed as ",
           dtype_name(dtype_of<T>));
  return static_cast<T*>(storage_->data()) + offset_;
}

// ---- argument checks used by every op: they throw mn::Error naming the op ----
void check_defined(const char* op, const Tensor& t, const char* name);
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
void check_same_shape(const char* op, const Tensor& a, const Tensor& b);
void check_floating(const char* op, const Tensor& t);
void check_dim(const char* op, const Tensor& t, int64_t ndim, const char* name);
// Throws when the tensor is on CUDA but this build has no CUDA kernels, or no
// device is present: there is no silent fallback to the CPU.
void check_cuda_usable(const char* op, const Tensor& t);

}  // namespace mn
