// conv2d: shape checks and the Tensor-level dispatch to the CPU / CUDA kernels
// (kernels/cpu/conv2d.cpp, kernels/cuda/conv2d.cu).
#include "kernels/conv2d.h"

#include <atomic>

#include "kernels/activation.h"
#include "runtime/dispatch.h"

namespace mn::kernels {

Conv2dGeom conv2d_geometry(const char* op, const Shape& xs, const Shape& ws,
                           const Conv2dParams& p) {
  MN_CHECK(xs.size() == 4, op, ": input must be (N, C, H, W), got ", shape_str(xs));
  MN_CHECK(ws.size() == 4, op, ": weight must be (K, C, R, S), got ", shape_str(ws));
  MN_CHECK(xs[1] == ws[1], op, ": input channels ", xs[1], " of input ", shape_str(xs),
           " do not match weight ", shape_str(ws), " (expects ", ws[1], ")");
  MN_CHECK(p.stride_h >= 1 && p.stride_w >= 1, op, ": stride must be >= 1, got (", p.stride_h,
           ", ", p.stride_w, ")");
  MN_CHECK(p.dilation_h >= 1 && p.dilation_w >= 1, op, ": dilation must be >= 1, got (",
           p.dilation_h, ", ", p.dilation_w, ")");
  MN_CHECK(p.pad_h >= 0 && p.pad_w >= 0, op, ": padding must be >= 0, got (", p.pad_h, ", ",
           p.pad_w, ")");
  MN_CHECK(ws[0] >= 1 && ws[2] >= 1 && ws[3] >= 1, op, ": empty weight ", shape_str(ws));
  Conv2dGeom g{};
  g.N = xs[0], g.C = xs[1], g.H = xs[2], g.W = xs[3];
  g.K = ws[0], g.R = ws[2], g.S = ws[3];
  g.sh = p.stride_h, g.sw = p.stride_w, g.ph = p.pad_h, g.pw = p.pad_w;
  g.dh = p.dilation_h, g.dw = p.dilation_w;
  const int64_t eh = g.dh * (g.R - 1) + 1, ew = g.dw * (g.S - 1) + 1;  // effective kernel
  MN_CHECK(g.H + 2 * g.ph >= eh && g.W + 2 * g.pw >= ew, op, ": kernel ", g.R, "x", g.S,
           " (dilated ", eh, "x", ew, ") larger than padded input ", shape_str(xs), " + pad (",
           g.ph, ", ", g.pw, ")");
  g.P = (g.H + 2 * g.ph - eh) / g.sh + 1;
  g.Q = (g.W + 2 * g.pw - ew) / g.sw + 1;
  return g;
}

std::string conv2d_geom_str(const Conv2dGeom& g) {
  return detail::str("x(", g.N, ", ", g.C, ", ", g.H, ", ", g.W, ") w(", g.K, ", ", g.C, ", ", g.R,
                     ", ", g.S, ") y(", g.N, ", ", g.K, ", ", g.P, ", ", g.Q, ") stride(", g.sh,
                     ", ", g.sw, ") pad(", g.ph, ", ", g.pw, ") dil(", g.dh, ", ", g.dw, ")");
}

namespace {
std::atomic<int> g_default_algo{static_cast<int>(Conv2dAlgo::Gemm)};
Conv2dAlgo resolve(Conv2dAlgo a) { return a == Conv2dAlgo::Default ? default_conv2d_algo() : a; }
}  // namespace

void set_default_conv2d_algo(Conv2dAlgo a) {
  MN_CHECK(a == Conv2dAlgo::Direct || a == Conv2dAlgo::Gemm,
           "set_default_conv2d_algo: expected Direct or Gemm, got ", static_cast<int>(a));
  g_default_algo.store(static_cast<int>(a));
}
Conv2dAlgo default_conv2d_algo() { return static_cast<Conv2dAlgo>(g_default_algo.load()); }

Tensor conv2d_forward(const Tensor& x_, const Tensor& w_, const Tensor& b_,
                      const Conv2dParams& p) {
  const char* op = "conv2d";
  check_defined(op, x_, "input");
  check_defined(op, w_, "weight");
  check_floating(op, x_);
  check_same_device(op, x_, w_);
  check_same_dtype(op, x_, w_);
  const Conv2dGeom g = conv2d_geometry(op, x_.shape(), w_.shape(), p);
  Tensor b;
  if (b_.defined()) {
    check_same_device(op, x_, b_);
    check_same_dtype(op, x_, b_);
    MN_CHECK(b_.dim() == 1 && b_.size(0) == g.K, op, ": bias must be (", g.K, "), got ",
             shape_str(b_.shape()), " for weight ", shape_str(w_.shape()));
    b = b_.contiguous();
  }
  const Tensor x = x_.contiguous(), w = w_.contiguous();
  Tensor y = Tensor::empty({g.N, g.K, g.P, g.Q}, x.dtype(), x.device());
  if (y.numel() == 0) return y;
  const Conv2dAlgo algo = resolve(p.algo);
  bool fused = false;  // bias + ReLU applied by the kernel
#ifdef MN_WITH_CUDA
  if (p.relu && x.is_cuda() && x.dtype() == DType::F32) {
    const float* bp = b.defined() ? b.data<float>() : nullptr;
    MN_CUDA_BRANCH(op, x.device(), x.dtype(),
                   fused = conv2d_forward_relu_fused_cuda(g, x.data<float>(), w.data<float>(), bp, y.data<float>(), algo));
  }
#endif
  if (!fused) {
    MN_DISPATCH_FLOAT(x.dtype(), op, [&] {
      const scalar_t* bp = b.defined() ? b.data<scalar_t>() : nullptr;
      MN_DEVICE_CALL(op, x.device(), conv2d_forward,
          g, x.data<scalar_t>(), w.data<scalar_t>(), bp, y.data<scalar_t>(), algo);
    });
  }
  if (p.relu && !fused) return activation_forward(Act::ReLU, y);
  return y;
}

Tensor conv2d_backward_data(const Tensor& dy_, const Tensor& w_, const Shape& x_shape,
                            const Conv2dParams& p) {
  const char* op = "conv2d_backward_data";
  check_defined(op, dy_, "grad_output");
  check_same_device(op, dy_, w_);
  check_same_dtype(op, dy_, w_);
  const Conv2dGeom g = conv2d_geometry(op, x_shape, w_.shape(), p);
  MN_CHECK(dy_.shape() == Shape({g.N, g.K, g.P, g.Q}), op, ": grad_output ",
           shape_str(dy_.shape()), " does not match ", conv2d_geom_str(g));
  const Tensor dy = dy_.contiguous(), w = w_.contiguous();
  Tensor dx = Tensor::empty(x_shape, dy.dtype(), dy.device());
  if (dx.numel() == 0) return dx;
  if (dy.numel() == 0) return dx.zero_();
  const Conv2dAlgo algo = resolve(p.algo);
  MN_DISPATCH_KERNEL(op, dy, conv2d_backward_data,
      g, dy.data<scalar_t>(), w.data<scalar_t>(), dx.data<scalar_t>(), algo);
  return dx;
}

Tensor conv2d_backward_weight(const Tensor& dy_, const Tensor& x_, const Shape& w_shape,
                              const Conv2dParams& p) {
  const char* op = "conv2d_backward_weight";
  check_defined(op, dy_, "grad_output");
  check_same_device(op, dy_, x_);
  check_same_dtype(op, dy_, x_);
  const Conv2dGeom g = conv2d_geometry(op, x_.shape(), w_shape, p);
  MN_CHECK(dy_.shape() == Shape({g.N, g.K, g.P, g.Q}), op, ": grad_output ",
           shape_str(dy_.shape()), " does not match ", conv2d_geom_str(g));
  const Tensor dy = dy_.contiguous(), x = x_.contiguous();
  Tensor dw = Tensor::empty(w_shape, dy.dtype(), dy.device());
  if (dy.numel() == 0 || x.numel() == 0) return dw.zero_();
  const Conv2dAlgo algo = resolve(p.algo);
  MN_DISPATCH_KERNEL(op, dy, conv2d_backward_weight,
      g, x.data<scalar_t>(), dy.data<scalar_t>(), dw.data<scalar_t>(), algo);
  return dw;
}

Tensor conv2d_backward_bias(const Tensor& dy_) {
  const char* op = "conv2d_backward_bias";
  check_defined(op, dy_, "grad_output");
  check_dim(op, dy_, 4, "grad_output");
  const Tensor dy = dy_.contiguous();
  Conv2dGeom g{};
  g.N = dy.size(0), g.K = dy.size(1), g.P = dy.size(2), g.Q = dy.size(3);
  Tensor db = Tensor::empty({g.K}, dy.dtype(), dy.device());
  if (dy.numel() == 0) return db.zero_();
  MN_DISPATCH_KERNEL(op, dy, conv2d_backward_bias, g, dy.data<scalar_t>(), db.data<scalar_t>());
  return db;
}

}  // namespace mn::kernels
