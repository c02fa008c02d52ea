// Tensor: construction, views, copies between devices and dtypes, printing,
// and the argument checks shared by every op.
#include "runtime/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <sstream>

#include "runtime/allocator.h"
#include "runtime/graph.h"
#include "runtime/upload.h"
#include "runtime/copy_kernels.h"
#include "runtime/dispatch.h"
#include "runtime/strided.h"
#ifdef MN_WITH_CUDA
#include "runtime/cuda_check.h"
#endif

namespace mn {

// ---------------------------------------------------------------- Storage --
Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.is_cpu()) {
    data_ = cpu_alloc(nbytes);
  } else {
#ifdef MN_WITH_CUDA
    MN_CHECK(device.index < cuda_device_count(), "Storage: ", device.str(),
             " requested but only ", cuda_device_count(), " CUDA device(s) are present");
    data_ = cuda::device_alloc(nbytes, device.index);
#else
    MN_THROW("Storage: ", device.str(), " requested but this build has no CUDA");
#endif
  }
}

Storage::~Storage() {
  if (device_.is_cpu()) cpu_free(data_, nbytes_);
  else cuda::device_free(data_, device_.index);
}

// ----------------------------------------------------------- construction --
Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) MN_CHECK(d >= 0, "Tensor::empty: negative size in shape ", shape_str(shape));
  MN_CHECK(shape.size() <= static_cast<size_t>(kMaxDims), "Tensor::empty: shape ", shape_str(shape),
           " has more than ", kMaxDims, " dimensions");
  Tensor t;
  t.storage_ = std::make_shared<Storage>(numel_of(shape) * dtype_size(dtype), device);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}
Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}
Tensor Tensor::scalar(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

Tensor Tensor::arange(int64_t n, DType dtype, Device device) {
  Tensor t = empty({n}, dtype, Device::cpu());
  MN_DISPATCH_ALL(dtype, "arange", [&] {
    scalar_t* p = t.data<scalar_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<scalar_t>(i);
  });
  return t.to(device);
}

Tensor Tensor::from_host(const void* src, const Shape& shape, DType dtype, Device device) {
  graph_unsafe("a tensor made from host data (an upload, or a constant frozen in the graph)");
  Tensor t = empty(shape, dtype, device);
  size_t bytes = t.nbytes();
  if (bytes == 0) return t;
  if (device.is_cpu()) {
    std::memcpy(t.raw_data(), src, bytes);
  } else {
#ifdef MN_WITH_CUDA
    cuda::upload(t.raw_data(), src, bytes, device.index);  // staged, no host wait (runtime/upload.h)
    detail::count_transfer(true, false, bytes);
#endif
  }
  return t;
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  MN_CHECK(static_cast<int64_t>(values.size()) == numel_of(shape), "Tensor::from_vector: ",
           values.size(), " values for shape ", shape_str(shape));
  return from_host(values.data(), shape, dtype_of<T>, device);
}

Tensor Tensor::empty_like(const Tensor& t) { return empty(t.shape(), t.dtype(), t.device()); }
Tensor Tensor::zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }

// ------------------------------------------------------------- reading back --
template <typename T>
std::vector<T> Tensor::to_vector() const {
  check_defined("to_vector");
  MN_CHECK(dtype_ == dtype_of<T>, "Tensor::to_vector: tensor ", desc(), " read as ",
           dtype_name(dtype_of<T>));
  detail::count_host_read();
  graph_unsafe("a host read of tensor values");
  Tensor c = cpu().contiguous();
  std::vector<T> out(static_cast<size_t>(numel()));
  if (!out.empty()) std::memcpy(out.data(), c.raw_data(), out.size() * sizeof(T));
  return out;
}

std::vector<double> Tensor::to_double_vector() const { return to(DType::F64).to_vector<double>(); }

double Tensor::item() const {
  MN_CHECK(numel() == 1, "Tensor::item: tensor ", desc(), " has ", numel(), " elements, not 1");
  return to_double_vector()[0];
}

// ---------------------------------------------------------------- metadata --
void Tensor::check_defined(const char* op) const {
  MN_CHECK(defined(), op, ": undefined tensor");
}

int64_t Tensor::size(int64_t d) const { return shape_[wrap_dim(d, dim(), "Tensor::size")]; }
int64_t Tensor::stride(int64_t d) const { return strides_[wrap_dim(d, dim(), "Tensor::stride")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

std::string Tensor::desc() const {
  if (!defined()) return "(undefined)";
  return shape_str(shape_) + " " + dtype_name(dtype_) + " " + device_.str();
}

void* Tensor::raw_data() const {
  check_defined("raw_data");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

// ------------------------------------------------------------------- views --
Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = strides;
  t.offset_ = offset;
  return t;
}

static Shape infer_shape(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      MN_CHECK(infer < 0, op, ": more than one -1 in ", shape_str(shape));
      infer = static_cast<int>(i);
    } else {
      MN_CHECK(out[i] >= 0, op, ": negative size in ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    MN_CHECK(known > 0 && numel % known == 0, op, ": cannot view ", shape_str(from), " as ",
             shape_str(shape));
    out[infer] = numel / known;
  }
  MN_CHECK(numel_of(out) == numel, op, ": cannot view ", shape_str(from), " (", numel,
           " elements) as ", shape_str(shape));
  return out;
}

Tensor Tensor::view(const Shape& shape) const {
  check_defined("view");
  Shape s = infer_shape(shape, numel(), "view", shape_);
  MN_CHECK(is_contiguous(), "view: tensor ", desc(), " with strides ", shape_str(strides_),
           " is not contiguous; use reshape()");
  return as_strided(s, contiguous_strides(s), offset_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  check_defined("reshape");
  if (is_contiguous()) return view(shape);
  return contiguous().view(shape);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  check_defined("narrow");
  int dd = wrap_dim(d, dim(), "narrow");
  MN_CHECK(start >= 0 && length >= 0 && start + length <= shape_[dd], "narrow: [", start, ", ",
           start + length, ") out of range for dimension ", dd, " of ", desc());
  Shape s = shape_;
  s[dd] = length;
  return as_strided(s, strides_, offset_ + start * strides_[dd]);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  check_defined("slice");
  int dd = wrap_dim(d, dim(), "slice");
  MN_CHECK(step > 0, "slice: step must be positive, got ", step);
  int64_t n = shape_[dd];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape_, st = strides_;
  s[dd] = (end - start + step - 1) / step;
  st[dd] *= step;
  return as_strided(s, st, offset_ + start * strides_[dd]);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  check_defined("select");
  int dd = wrap_dim(d, dim(), "select");
  if (index < 0) index += shape_[dd];
  MN_CHECK(index >= 0 && index < shape_[dd], "select: index ", index, " out of range for dimension ",
           dd, " of ", desc());
  Shape s = shape_, st = strides_;
  int64_t off = offset_ + index * strides_[dd];
  s.erase(s.begin() + dd);
  st.erase(st.begin() + dd);
  return as_strided(s, st, off);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  check_defined("transpose");
  int a = wrap_dim(d0, dim(), "transpose"), b = wrap_dim(d1, dim(), "transpose");
  Shape s = shape_, st = strides_;
  std::swap(s[a], s[b]);
  std::swap(st[a], st[b]);
  return as_strided(s, st, offset_);
}

Tensor Tensor::t() const {
  MN_CHECK(dim() == 2, "t: expected a 2-d tensor, got ", desc());
  return transpose(0, 1);
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  check_defined("permute");
  MN_CHECK(static_cast<int64_t>(order.size()) == dim(), "permute: order of length ", order.size(),
           " for ", desc());
  Shape s(dim()), st(dim());
  std::vector<bool> seen(dim(), false);
  for (int64_t i = 0; i < dim(); ++i) {
    int d = wrap_dim(order[i], dim(), "permute");
    MN_CHECK(!seen[d], "permute: dimension ", d, " repeated");
    seen[d] = true;
    s[i] = shape_[d];
    st[i] = strides_[d];
  }
  return as_strided(s, st, offset_);
}

Tensor Tensor::expand(const Shape& shape) const {
  check_defined("expand");
  MN_CHECK(shape.size() >= shape_.size(), "expand: cannot expand ", desc(), " to ", shape_str(shape));
  size_t lead = shape.size() - shape_.size();
  Shape s(shape.size()), st(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      MN_CHECK(shape[i] >= 0, "expand: size -1 not allowed in new leading dimension");
      s[i] = shape[i];
      st[i] = 0;
      continue;
    }
    int64_t own = shape_[i - lead];
    int64_t want = shape[i] == -1 ? own : shape[i];
    if (own == want) {
      s[i] = own;
      st[i] = strides_[i - lead];
    } else {
      MN_CHECK(own == 1, "expand: cannot expand ", desc(), " to ", shape_str(shape));
      s[i] = want;
      st[i] = 0;
    }
  }
  return as_strided(s, st, offset_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  check_defined("unsqueeze");
  int dd = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape_, st = strides_;
  int64_t stride = dd < dim() ? shape_[dd] * strides_[dd] : 1;
  s.insert(s.begin() + dd, 1);
  st.insert(st.begin() + dd, stride);
  return as_strided(s, st, offset_);
}

Tensor Tensor::squeeze(int64_t d) const {
  check_defined("squeeze");
  int dd = wrap_dim(d, dim(), "squeeze");
  MN_CHECK(shape_[dd] == 1, "squeeze: dimension ", dd, " of ", desc(), " has size ", shape_[dd]);
  Shape s = shape_, st = strides_;
  s.erase(s.begin() + dd);
  st.erase(st.begin() + dd);
  return as_strided(s, st, offset_);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  check_defined("flatten");
  if (dim() == 0) return reshape({1});
  int a = wrap_dim(start_dim, dim(), "flatten"), b = wrap_dim(end_dim, dim(), "flatten");
  MN_CHECK(a <= b, "flatten: start_dim ", a, " after end_dim ", b);
  Shape s(shape_.begin(), shape_.begin() + a);
  int64_t m = 1;
  for (int i = a; i <= b; ++i) m *= shape_[i];
  s.push_back(m);
  s.insert(s.end(), shape_.begin() + b + 1, shape_.end());
  return reshape(s);
}

// ------------------------------------------------------------------ copies --
Tensor Tensor::contiguous() const {
  check_defined("contiguous");
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  check_defined("clone");
  Tensor out = empty(shape_, dtype_, device_);
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  check_defined("to");
  if (dtype == dtype_) return *this;
  Tensor out = empty(shape_, dtype, device_);
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device device) const {
  check_defined("to");
  if (device == device_) return *this;
  graph_unsafe("a copy between the host and a device");
  Tensor src = contiguous();
  Tensor out = empty(shape_, dtype_, device);
  size_t bytes = out.nbytes();
  if (bytes == 0) return out;
#ifdef MN_WITH_CUDA
  if (device.is_cuda() && device_.is_cpu()) {
    cuda::upload(out.raw_data(), src.raw_data(), bytes, device.index);  // staged, no host wait (runtime/upload.h)
  } else if (device.is_cpu()) {
    const CudaDeviceScope guard(device_);
    CUDA_CHECK(cudaMemcpy(out.raw_data(), src.raw_data(), bytes, cudaMemcpyDeviceToHost));
    cuda::check_device_report();  // a synchronisation point: bad indices surface here
  } else {
    CUDA_CHECK(cudaMemcpyPeer(out.raw_data(), device.index, src.raw_data(), device_.index, bytes));
  }
  detail::count_transfer(device.is_cuda(), device_.is_cuda(), bytes);
#else
  MN_THROW("to: ", device_.str(), " -> ", device.str(), " needs CUDA, which this build lacks");
#endif
  return out;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_defined("copy_");
  MN_CHECK(src.defined(), "copy_: undefined source");
  Tensor s = src.shape() == shape_ ? src : src.expand(shape_);
  if (s.device() != device_) s = s.contiguous().to(device_);
  if (device_.is_cpu()) {
    detail::strided_copy_cpu(s, *this);
  } else {
#ifdef MN_WITH_CUDA
    detail::strided_copy_cuda(s, *this);
#endif
  }
  return *this;
}

Tensor& Tensor::fill_(double value) {
  check_defined("fill_");
  if (device_.is_cpu()) {
    detail::fill_cpu(*this, value);
  } else {
#ifdef MN_WITH_CUDA
    detail::fill_cuda(*this, value);
#endif
  }
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0.0); }

// ----------------------------------------------------------------- printing --
std::string Tensor::str(int64_t max_per_dim) const {
  if (!defined()) return "tensor(undefined)";
  std::vector<double> v = to_double_vector();
  std::ostringstream os;
  os << "tensor(";
  bool integral = !is_floating(dtype_);
  std::function<void(int64_t, int64_t, int)> rec = [&](int64_t d, int64_t base, int indent) {
    if (d == dim()) {
      if (integral) os << static_cast<int64_t>(v[base]);
      else os << std::setprecision(6) << v[base];
      return;
    }
    os << "[";
    int64_t n = shape_[d], inner = 1;
    for (int64_t k = d + 1; k < dim(); ++k) inner *= shape_[k];
    for (int64_t i = 0; i < n; ++i) {
      if (n > max_per_dim && i == max_per_dim / 2) {
        os << "...";
        i = n - max_per_dim / 2 - 1;
        if (i + 1 < n) os << (d + 1 == dim() ? ", " : ",\n" + std::string(indent + 1, ' '));
        continue;
      }
      rec(d + 1, base + i * inner, indent + 1);
      if (i + 1 < n) os << (d + 1 == dim() ? ", " : ",\n" + std::string(indent + 1, ' '));
    }
    os << "]";
  };
  rec(0, 0, 7);
  os << ", shape=" << shape_str(shape_) << ", dtype=" << dtype_name(dtype_)
     << ", device=" << device_.str() << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

// ------------------------------------------------------------------ checks --
void check_defined(const char* op, const Tensor& t, const char* name) {
  MN_CHECK(t.defined(), op, ": argument '", name, "' is an undefined tensor");
}
void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  MN_CHECK(a.device() == b.device(), op, ": tensors on different devices: ", a.desc(), " and ",
           b.desc());
}
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  MN_CHECK(a.dtype() == b.dtype(), op, ": dtype mismatch: ", a.desc(), " and ", b.desc());
}
void check_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  MN_CHECK(a.shape() == b.shape(), op, ": shape mismatch: ", a.desc(), " and ", b.desc());
}
void check_floating(const char* op, const Tensor& t) {
  MN_CHECK(t.defined() && is_floating(t.dtype()), op, ": expected a float32/float64 tensor, got ",
           t.desc());
}
void check_dim(const char* op, const Tensor& t, int64_t ndim, const char* name) {
  MN_CHECK(t.defined() && t.dim() == ndim, op, ": '", name, "' must be ", ndim, "-d, got ", t.desc());
}
void check_cuda_usable(const char* op, const Tensor& t) {
  if (!cuda_compiled())
    MN_THROW(op, ": tensor ", t.desc(), " needs CUDA, but this build has no CUDA kernels "
             "(configure with -DMN_ENABLE_CUDA=ON)");
  if (!cuda_available())
    MN_THROW(op, ": tensor ", t.desc(), " needs CUDA, but no CUDA device is present");
}

// ------------------------------------------------------------ strided.h ---
StridedIndexer make_indexer(const Tensor& t, const Shape& shape) {
  Tensor v = t.shape() == shape ? t : t.expand(shape);
  StridedIndexer ix;
  ix.ndim = static_cast<int>(v.dim());
  for (int d = 0; d < ix.ndim; ++d) {
    ix.sizes[d] = v.shape()[d];
    ix.strides[d] = v.strides()[d];
  }
  return ix;
}

// ------------------------------------------------------- CPU copy kernels --
namespace detail {

void strided_copy_cpu(const Tensor& src, const Tensor& dst) {
  int64_t n = dst.numel();
  if (n == 0) return;
  if (src.is_contiguous() && dst.is_contiguous() && src.dtype() == dst.dtype() && src.numel() == n) {
    std::memmove(dst.raw_data(), src.raw_data(), dst.nbytes());
    return;
  }
  StridedIndexer si = make_indexer(src, dst.shape()), di = make_indexer(dst);
  bool contiguous = src.is_contiguous() && dst.is_contiguous() && src.numel() == n;
  MN_DISPATCH_ALL(src.dtype(), "copy_", [&] {
    using S = scalar_t;
    const S* sp = src.data<S>();
    MN_DISPATCH_ALL(dst.dtype(), "copy_", [&] {
      scalar_t* dp = dst.data<scalar_t>();
      if (contiguous) {
        for (int64_t i = 0; i < n; ++i) dp[i] = static_cast<scalar_t>(sp[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) dp[di.offset(i)] = static_cast<scalar_t>(sp[si.offset(i)]);
      }
    });
  });
}

void fill_cpu(const Tensor& dst, double value) {
  int64_t n = dst.numel();
  StridedIndexer di = make_indexer(dst);
  bool contiguous = dst.is_contiguous();
  MN_DISPATCH_ALL(dst.dtype(), "fill_", [&] {
    scalar_t v = static_cast<scalar_t>(value);
    scalar_t* p = dst.data<scalar_t>();
    if (contiguous) std::fill(p, p + n, v);
    else for (int64_t i = 0; i < n; ++i) p[di.offset(i)] = v;
  });
}

}  // namespace detail

#define MN_INSTANTIATE_TENSOR_T(T)                                                         \
  template Tensor Tensor::from_vector<T>(const std::vector<T>&, const Shape&, Device);   \
  template std::vector<T> Tensor::to_vector<T>() const;
MN_INSTANTIATE_TENSOR_T(float)
MN_INSTANTIATE_TENSOR_T(double)
MN_INSTANTIATE_TENSOR_T(int32_t)
MN_INSTANTIATE_TENSOR_T(int64_t)
MN_INSTANTIATE_TENSOR_T(uint8_t)

}  // namespace mn
