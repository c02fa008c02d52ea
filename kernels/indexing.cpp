// Tensor-level indexing ops (kernels/indexing.h): checks with shapes in the
// messages, index conversion to int64, element-size dispatch for data movement,
// float dispatch for the accumulating ops, CPU vs CUDA.
#include "kernels/indexing.h"

#include "runtime/dispatch.h"
#include "runtime/graph.h"

namespace mn::kernels {

namespace {
// Calls f(E{}) with E an unsigned type of the tensor's element size.
template <typename F>
void dispatch_size(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: f(uint8_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: MN_THROW("indexing: unsupported element size ", dtype_size(t));
  }
}

Tensor index_i64(const char* op, const Tensor& idx, const Tensor& like) {
  check_defined(op, idx, "index");
  MN_CHECK(idx.dtype() == DType::I64 || idx.dtype() == DType::I32, op, ": index has dtype ",
           dtype_name(idx.dtype()), " (expected int32 or int64)");
  MN_CHECK(idx.device() == like.device(), op, ": index on ", idx.device().str(), " but input on ",
           like.device().str());
  return idx.to(DType::I64).contiguous();
}

// x's strides over idx's sizes, with the indexed dimension's stride zeroed.
StridedIndexer dim_indexer(const Tensor& x, const Shape& sizes, int dim) {
  StridedIndexer ix;
  ix.ndim = static_cast<int>(sizes.size());
  for (int d = 0; d < ix.ndim; ++d) {
    ix.sizes[d] = sizes[d];
    ix.strides[d] = d == dim ? 0 : x.stride(d);
  }
  return ix;
}

void split_dim(const Shape& s, int dim, int64_t& outer, int64_t& inner) {
  outer = inner = 1;
  for (int d = 0; d < dim; ++d) outer *= s[d];
  for (int d = dim + 1; d < static_cast<int>(s.size()); ++d) inner *= s[d];
}
}  // namespace

Tensor index_select(const Tensor& x_in, int64_t dim_in, const Tensor& idx_in) {
  check_defined("index_select", x_in, "x");
  MN_CHECK(idx_in.dim() <= 1, "index_select: index must be 1-D, got ", shape_str(idx_in.shape()));
  const int dim = wrap_dim(dim_in, x_in.dim(), "index_select");
  Tensor idx = index_i64("index_select", idx_in, x_in);
  Tensor x = x_in.contiguous();
  int64_t outer, inner;
  split_dim(x.shape(), dim, outer, inner);
  const int64_t n = x.size(dim), k = idx.numel();
  Shape os = x.shape();
  os[dim] = k;
  Tensor out = Tensor::empty(os, x.dtype(), x.device());
  dispatch_size(x.dtype(), [&](auto tag) {
    using E = decltype(tag);
    const E* xp = static_cast<const E*>(x.raw_data());
    E* op = static_cast<E*>(out.raw_data());
    if (x.is_cuda()) {
      MN_CUDA_BRANCH("index_select", x.device(), x.dtype(), {
        index_select_cuda<E>(xp, outer, n, inner, idx.data<int64_t>(), k, op);
      });
    } else {
      index_select_cpu<E>(xp, outer, n, inner, idx.data<int64_t>(), k, op);
    }
  });
  return out;
}

Tensor index_add(const Shape& shape, int64_t dim_in, const Tensor& idx_in, const Tensor& g_in) {
  check_defined("index_add", g_in, "grad");
  check_floating("index_add", g_in);
  const int dim = wrap_dim(dim_in, static_cast<int64_t>(shape.size()), "index_add");
  Tensor idx = index_i64("index_add", idx_in, g_in);
  Shape gs = shape;
  gs[dim] = idx.numel();
  MN_CHECK(g_in.shape() == gs, "index_add: source ", shape_str(g_in.shape()), " must be ",
           shape_str(gs), " for output ", shape_str(shape));
  Tensor g = g_in.contiguous();
  Tensor out = Tensor::zeros(shape, g.dtype(), g.device());
  int64_t outer, inner;
  split_dim(shape, dim, outer, inner);
  MN_DISPATCH_FLOAT(g.dtype(), "index_add", [&] {
    if (g.is_cuda()) {
      MN_CUDA_BRANCH("index_add", g.device(), g.dtype(), {
        index_add_cuda<scalar_t>(g.data<scalar_t>(), outer, idx.numel(), inner, idx.data<int64_t>(), shape[dim], out.data<scalar_t>());
      });
    } else {
      index_add_cpu<scalar_t>(g.data<scalar_t>(), outer, idx.numel(), inner, idx.data<int64_t>(), shape[dim], out.data<scalar_t>());
    }
  });
  return out;
}

namespace {
void check_index_shape(const char* op, const Tensor& idx, const Tensor& x, int dim, bool skip_dim,
                       const char* xname) {
  MN_CHECK(idx.dim() == x.dim(), op, ": index ", shape_str(idx.shape()), " must have the rank of ",
           xname, " ", shape_str(x.shape()));
  for (int d = 0; d < x.dim(); ++d)
    MN_CHECK((skip_dim && d == dim) || idx.size(d) <= x.size(d), op, ": index ",
             shape_str(idx.shape()), " larger than ", xname, " ", shape_str(x.shape()),
             " in dimension ", d);
}
}  // namespace

Tensor gather(const Tensor& x, int64_t dim_in, const Tensor& idx_in) {
  check_defined("gather", x, "x");
  const int dim = wrap_dim(dim_in, x.dim(), "gather");
  Tensor idx = index_i64("gather", idx_in, x);
  check_index_shape("gather", idx, x, dim, true, "input");
  MN_CHECK(x.dim() <= kMaxDims, "gather: at most ", kMaxDims, " dimensions");
  Tensor out = Tensor::empty(idx.shape(), x.dtype(), x.device());
  StridedIndexer xi = dim_indexer(x, idx.shape(), dim);
  const int64_t m = idx.numel();
  dispatch_size(x.dtype(), [&](auto tag) {
    using E = decltype(tag);
    const E* xp = static_cast<const E*>(x.raw_data());
    E* op = static_cast<E*>(out.raw_data());
    if (x.is_cuda()) {
      MN_CUDA_BRANCH("gather", x.device(), x.dtype(), {
        gather_cuda<E>(xp, xi, x.stride(dim), x.size(dim), idx.data<int64_t>(), m, op);
      });
    } else {
      gather_cpu<E>(xp, xi, x.stride(dim), x.size(dim), idx.data<int64_t>(), m, op);
    }
  });
  return out;
}

Tensor scatter_add(const Tensor& self, int64_t dim_in, const Tensor& idx_in, const Tensor& src) {
  check_defined("scatter_add", self, "self");
  check_defined("scatter_add", src, "src");
  check_floating("scatter_add", self);
  check_same_dtype("scatter_add", self, src);
  check_same_device("scatter_add", self, src);
  const int dim = wrap_dim(dim_in, self.dim(), "scatter_add");
  Tensor idx = index_i64("scatter_add", idx_in, self);
  check_index_shape("scatter_add", idx, self, dim, true, "self");
  check_index_shape("scatter_add", idx, src, dim, false, "src");
  Tensor out = self.clone();
  StridedIndexer oi = dim_indexer(out, idx.shape(), dim);
  StridedIndexer si = dim_indexer(src, idx.shape(), -1);
  const int64_t m = idx.numel();
  MN_DISPATCH_FLOAT(self.dtype(), "scatter_add", [&] {
    if (self.is_cuda()) {
      MN_CUDA_BRANCH("scatter_add", self.device(), self.dtype(), {
        scatter_add_cuda<scalar_t>(out.data<scalar_t>(), oi, out.stride(dim), out.size(dim), idx.data<int64_t>(), src.data<scalar_t>(), si, m);
      });
    } else {
      scatter_add_cpu<scalar_t>(out.data<scalar_t>(), oi, out.stride(dim), out.size(dim), idx.data<int64_t>(), src.data<scalar_t>(), si, m);
    }
  });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined("where", cond, "cond");
  check_defined("where", a, "a");
  check_defined("where", b, "b");
  MN_CHECK(cond.dtype() == DType::U8, "where: cond must be uint8, got ", cond.desc());
  MN_CHECK(a.dtype() == b.dtype(), "where: a ", a.desc(), " and b ", b.desc(), " differ in dtype");
  MN_CHECK(a.device() == b.device() && a.device() == cond.device(), "where: cond ", cond.desc(),
           ", a ", a.desc(), ", b ", b.desc(), " are not on one device");
  Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  MN_CHECK(static_cast<int>(s.size()) <= kMaxDims, "where: at most ", kMaxDims, " dimensions");
  Tensor out = Tensor::empty(s, a.dtype(), a.device());
  StridedIndexer ic = make_indexer(cond, s), ia = make_indexer(a, s), ib = make_indexer(b, s);
  const int64_t n = out.numel();
  dispatch_size(a.dtype(), [&](auto tag) {
    using E = decltype(tag);
    const E* ap = static_cast<const E*>(a.raw_data());
    const E* bp = static_cast<const E*>(b.raw_data());
    E* op = static_cast<E*>(out.raw_data());
    if (a.is_cuda()) {
      MN_CUDA_BRANCH("where", a.device(), a.dtype(), {
        where_cuda<E>(n, cond.data<uint8_t>(), ic, ap, ia, bp, ib, op);
      });
    } else {
      where_cpu<E>(n, cond.data<uint8_t>(), ic, ap, ia, bp, ib, op);
    }
  });
  return out;
}

Tensor masked_select(const Tensor& x_in, const Tensor& mask_in) {
  graph_unsafe("masked_select (its output size is read from the device)");
  check_defined("masked_select", x_in, "x");
  check_defined("masked_select", mask_in, "mask");
  MN_CHECK(mask_in.dtype() == DType::U8, "masked_select: mask must be uint8, got ", mask_in.desc());
  check_same_device("masked_select", x_in, mask_in);
  Shape s = broadcast_shapes(x_in.shape(), mask_in.shape(), "masked_select");
  Tensor x = x_in.expand(s).contiguous(), mask = mask_in.expand(s).contiguous();
  const int64_t n = x.numel();
  Tensor out;
  dispatch_size(x.dtype(), [&](auto tag) {
    using E = decltype(tag);
    const E* xp = static_cast<const E*>(x.raw_data());
    const uint8_t* mp = mask.data<uint8_t>();
    if (x.is_cuda()) {
      MN_CUDA_BRANCH("masked_select", x.device(), x.dtype(), {
        Tensor offs = Tensor::empty({mask_scan_blocks(n) + 1}, DType::I64, x.device());
        const int64_t total = mask_scan_cuda(mp, n, offs.data<int64_t>());
        out = Tensor::empty({total}, x.dtype(), x.device());
        masked_select_cuda<E>(xp, mp, n, offs.data<int64_t>(), static_cast<E*>(out.raw_data()));
      });
    } else {
      int64_t total = 0;
      for (int64_t i = 0; i < n; ++i) total += mp[i] != 0;
      out = Tensor::empty({total}, x.dtype(), x.device());
      masked_select_cpu<E>(xp, mp, n, static_cast<E*>(out.raw_data()));
    }
  });
  return out;
}

Tensor masked_scatter(const Tensor& mask_in, const Tensor& src_in) {
  check_defined("masked_scatter", mask_in, "mask");
  check_defined("masked_scatter", src_in, "src");
  MN_CHECK(mask_in.dtype() == DType::U8, "masked_scatter: mask must be uint8, got ", mask_in.desc());
  check_same_device("masked_scatter", mask_in, src_in);
  Tensor mask = mask_in.contiguous(), src = src_in.contiguous();
  const int64_t n = mask.numel();
  Tensor out = Tensor::empty(mask.shape(), src.dtype(), src.device());
  dispatch_size(src.dtype(), [&](auto tag) {
    using E = decltype(tag);
    const E* sp = static_cast<const E*>(src.raw_data());
    const uint8_t* mp = mask.data<uint8_t>();
    E* op = static_cast<E*>(out.raw_data());
    if (src.is_cuda()) {
      MN_CUDA_BRANCH("masked_scatter", src.device(), src.dtype(), {
        Tensor offs = Tensor::empty({mask_scan_blocks(n) + 1}, DType::I64, src.device());
        const int64_t total = mask_scan_cuda(mp, n, offs.data<int64_t>());
        MN_CHECK(total == src.numel(), "masked_scatter: mask has ", total, " set elements but src has ",
                 src.numel());
        masked_scatter_cuda<E>(sp, mp, n, offs.data<int64_t>(), op);
      });
    } else {
      int64_t total = 0;
      for (int64_t i = 0; i < n; ++i) total += mp[i] != 0;
      MN_CHECK(total == src.numel(), "masked_scatter: mask has ", total, " set elements but src has ",
               src.numel());
      masked_scatter_cpu<E>(sp, mp, n, op);
    }
  });
  return out;
}

}  // namespace mn::kernels
