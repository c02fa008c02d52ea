// Tensor-level concat / split / stack (kernels/join.h).
#include "kernels/join.h"

#include "runtime/dispatch.h"

namespace mn::kernels {

Tensor concat(const std::vector<Tensor>& xs, int64_t dim_in) {
  MN_CHECK(!xs.empty(), "concat: empty list of tensors");
  const Tensor& x0 = xs[0];
  check_defined("concat", x0, "xs[0]");
  const int dim = wrap_dim(dim_in, x0.dim(), "concat");
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    check_defined("concat", x, "xs[i]");
    MN_CHECK(x.dtype() == x0.dtype() && x.device() == x0.device(), "concat: tensor ", i, " ",
             x.desc(), " differs in dtype or device from tensor 0 ", x0.desc());
    MN_CHECK(x.dim() == x0.dim(), "concat: tensor ", i, " ", shape_str(x.shape()),
             " has a different rank than tensor 0 ", shape_str(x0.shape()));
    for (int d = 0; d < x.dim(); ++d)
      MN_CHECK(d == dim || x.size(d) == x0.size(d), "concat: tensor ", i, " ",
               shape_str(x.shape()), " does not match tensor 0 ", shape_str(x0.shape()),
               " outside dimension ", dim);
    total += x.size(dim);
  }
  Shape os = x0.shape();
  os[dim] = total;
  Tensor out = Tensor::empty(os, x0.dtype(), x0.device());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= os[d];
  for (int d = dim + 1; d < static_cast<int>(os.size()); ++d) inner *= os[d];
  int64_t off = 0;
  for (const Tensor& x_in : xs) {
    Tensor x = x_in.contiguous();
    const int64_t row_len = x.size(dim) * inner;
    auto run = [&](auto tag) {
      using E = decltype(tag);
      const E* sp = static_cast<const E*>(x.raw_data());
      E* dp = static_cast<E*>(out.raw_data()) + off * inner;
      if (x.is_cuda()) {
        MN_CUDA_BRANCH("concat", x.device(), x.dtype(), {
          copy_rows_cuda<E>(sp, outer, row_len, dp, total * inner);
        });
      } else {
        copy_rows_cpu<E>(sp, outer, row_len, dp, total * inner);
      }
    };
    switch (dtype_size(x.dtype())) {
      case 1: run(uint8_t{}); break;
      case 4: run(uint32_t{}); break;
      default: run(uint64_t{}); break;
    }
    off += x.size(dim);
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim_in) {
  check_defined("split", x, "x");
  const int dim = wrap_dim(dim_in, x.dim(), "split");
  int64_t sum = 0;
  for (int64_t s : sizes) {
    MN_CHECK(s >= 0, "split: negative size ", s);
    sum += s;
  }
  MN_CHECK(sum == x.size(dim), "split: sizes add up to ", sum, " but dimension ", dim, " of ",
           shape_str(x.shape()), " has ", x.size(dim));
  std::vector<Tensor> out;
  int64_t off = 0;
  for (int64_t s : sizes) {
    out.push_back(x.narrow(dim, off, s));
    off += s;
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim_in) {
  MN_CHECK(!xs.empty(), "stack: empty list of tensors");
  check_defined("stack", xs[0], "xs[0]");
  const int dim = wrap_dim(dim_in, xs[0].dim() + 1, "stack");
  std::vector<Tensor> us;
  for (size_t i = 0; i < xs.size(); ++i) {
    check_defined("stack", xs[i], "xs[i]");
    MN_CHECK(xs[i].shape() == xs[0].shape(), "stack: tensor ", i, " ", shape_str(xs[i].shape()),
             " differs from tensor 0 ", shape_str(xs[0].shape()));
    us.push_back(xs[i].unsqueeze(dim));
  }
  return concat(us, dim);
}

}  // namespace mn::kernels
