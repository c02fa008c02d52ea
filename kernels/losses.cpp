// Tensor-level dispatch of the fused losses (kernels/losses.h): argument checks,
// output allocation, and the CPU / CUDA choice (no silent fallback).
#include "kernels/losses.h"

#include "kernels/gemm.h"
#include "kernels/gemm_config.h"
#include "runtime/dispatch.h"

namespace mn::kernels {
namespace {

Tensor idx64(const Tensor& idx, const char* op) {
  MN_CHECK(idx.dtype() == DType::I64 || idx.dtype() == DType::I32, op,
           ": index tensor must be int32 or int64, got ", dtype_name(idx.dtype()));
  return idx.to(DType::I64).contiguous();
}

// Every index of a CPU index list must name one of the B embedding rows: the
// fused kernels read (and, in backward, write) rows[idx] without bounds checks.
// CUDA index lists are not checked here (that would need a device sync).
void check_rows(const Tensor& i64, int64_t B, const char* op) {
  if (!i64.is_cpu()) return;
  const int64_t* p = i64.data<int64_t>();
  for (int64_t k = 0, n = i64.numel(); k < n; ++k)
    MN_CHECK(p[k] >= 0 && p[k] < B, op, ": index ", p[k], " (entry ", k, " of ",
             shape_str(i64.shape()), ") out of range for ", B, " embedding rows");
}

TermResult alloc_terms(int64_t N, DType dt, Device dev, bool pair) {
  TermResult r;
  r.loss = Tensor::empty({N}, dt, dev);
  r.wp = Tensor::empty({N}, dt, dev);
  r.dp = Tensor::empty({N}, dt, dev);
  if (!pair) {
    r.wn = Tensor::empty({N}, dt, dev);
    r.dn = Tensor::empty({N}, dt, dev);
  }
  r.active = Tensor::empty({N}, DType::U8, dev);
  r.is_pos = Tensor::empty({N}, DType::U8, dev);
  r.stats = Tensor::empty({kStatsLen}, dt, dev);
  return r;
}

template <typename T>
TermOut<T> outs(const TermResult& r) {
  TermOut<T> o;
  o.loss = r.loss.data<T>();
  o.wp = r.wp.data<T>();
  o.dp = r.dp.data<T>();
  if (r.wn.defined()) {
    o.wn = r.wn.data<T>();
    o.dn = r.dn.data<T>();
  }
  o.active = r.active.data<uint8_t>();
  o.is_pos = r.is_pos.data<uint8_t>();
  return o;
}

template <typename T>
void reduce(const TermResult& r, Reduction red, int64_t N, bool pair, const int64_t* count = nullptr) {
  const T* d2 = pair ? nullptr : r.dn.data<T>();
  const uint8_t* pos = pair ? r.is_pos.data<uint8_t>() : nullptr;
  using scalar_t = T;
  MN_DEVICE_CALL("loss_reduce", r.loss.device(), loss_reduce, red, N, r.loss.data<T>(),
                 r.dp.data<T>(), d2, pos, r.active.data<uint8_t>(), r.stats.data<T>(), count);
}

void check_emb(const char* op, const Tensor& t, const char* name) {
  check_defined(op, t, name);
  check_floating(op, t);
  check_dim(op, t, 2, name);
}

// A padded index list's term count (TermRows::count): one int64 beside the embeddings.
void check_count(const char* op, const Tensor& count, const Tensor& emb) {
  MN_CHECK(count.dtype() == DType::I64 && count.numel() == 1, op, ": the term count must be one int64, got ",
           dtype_name(count.dtype()), " ", shape_str(count.shape()));
  MN_CHECK(count.device() == emb.device(), op, ": the term count is on ", count.device().str(),
           ", the embeddings on ", emb.device().str());
}

// Shared body of the dense and indexed triplet forwards.
TermResult triplet_run(const TripletLossParams& P, const Tensor& a, const Tensor& p,
                       const Tensor& n, const Tensor& ia, const Tensor& ip, const Tensor& in,
                       int64_t N, Reduction red, const Tensor& count = Tensor()) {
  const char* op = "triplet_loss";
  const bool pair = !n.defined();
  if (count.defined()) {
    check_count(op, count, a);
    MN_CHECK(!triplet_kind_is_global(P.kind), op, ": the ", triplet_kind_name(P.kind),
             " loss takes batch means over every term; give it an exact index list, not a padded one with a count");
  }
  MN_CHECK(pair == (P.kind == TripletKind::Pull), op,
           ": a negative is required exactly when the kind is not Pull");
  if (P.kind == TripletKind::Kumar || P.kind == TripletKind::GlobalTriplet)
    MN_CHECK(P.margin > 0, op, ": the Kumar term needs margin > 0, got ", P.margin);
  const int64_t D = a.size(1);
  TermResult r = alloc_terms(N, a.dtype(), a.device(), pair);
  if (triplet_kind_is_global(P.kind)) red = Reduction::Sum;  // per-term parts sum to eq. 5/6
  MN_DISPATCH_FLOAT(a.dtype(), op, [&] {
    TermRows<scalar_t> rows;
    rows.Ea = a.data<scalar_t>();
    rows.Ep = p.data<scalar_t>();
    rows.En = pair ? nullptr : n.data<scalar_t>();
    rows.ia = ia.defined() ? ia.data<int64_t>() : nullptr;
    rows.ip = ip.defined() ? ip.data<int64_t>() : nullptr;
    rows.in = in.defined() ? in.data<int64_t>() : nullptr;
    // The indexed forms pass one embedding matrix as a, p and n (and check CPU
    // lists against its rows); CUDA kernels check device lists against the same bound.
    if (ia.defined() || ip.defined() || in.defined()) rows.rows = a.size(0);
    rows.count = count.defined() ? count.data<int64_t>() : nullptr;
    MN_DEVICE_CALL(op, a.device(), triplet_loss_forward, P, N, D, rows, outs<scalar_t>(r));
    reduce<scalar_t>(r, red, N, pair, rows.count);
  });
  return r;
}

// Column k of an (N, w) index tensor as a contiguous (N) view-copy.
Tensor col(const Tensor& idx, int64_t k) { return idx.select(1, k).contiguous(); }

}  // namespace

TermResult triplet_loss_terms(const TripletLossParams& P, const Tensor& a, const Tensor& p,
                              const Tensor& n, Reduction red) {
  const char* op = "triplet_loss";
  check_emb(op, a, "anchor");
  check_emb(op, p, "positive");
  check_same_shape(op, a, p);
  check_same_dtype(op, a, p);
  check_same_device(op, a, p);
  if (n.defined()) {
    check_same_shape(op, a, n);
    check_same_dtype(op, a, n);
    check_same_device(op, a, n);
  }
  return triplet_run(P, a.contiguous(), p.contiguous(), n.defined() ? n.contiguous() : Tensor(),
                     Tensor(), Tensor(), Tensor(), a.size(0), red);
}

TermResult triplet_loss_terms_indexed(const TripletLossParams& P, const Tensor& e,
                                      const Tensor& idx, Reduction red, const Tensor& count) {
  const char* op = "triplet_loss_indexed";
  check_emb(op, e, "embeddings");
  check_dim(op, idx, 2, "indices");
  const bool pair = P.kind == TripletKind::Pull;
  MN_CHECK(idx.size(1) == (pair ? 2 : 3), op, ": indices must be (T, ", pair ? 2 : 3, "), got ",
           shape_str(idx.shape()));
  MN_CHECK(idx.device() == e.device(), op, ": indices on ", idx.device().str(),
           ", embeddings on ", e.device().str());
  Tensor i64 = idx64(idx, op);
  check_rows(i64, e.size(0), op);
  Tensor ec = e.contiguous();
  return triplet_run(P, ec, ec, pair ? Tensor() : ec, col(i64, 0), col(i64, 1),
                     pair ? Tensor() : col(i64, 2), idx.size(0), red,
                     count.defined() ? count.contiguous().view({1}) : Tensor());
}

namespace {
TermResult contrastive_run(ContrastiveForm form, double margin, const Tensor& x1,
                           const Tensor& x2, const Tensor& i1, const Tensor& i2,
                           const Tensor& label, int64_t N, Reduction red, const Tensor& count = Tensor()) {
  const char* op = "contrastive_loss";
  MN_CHECK(label.numel() == N, op, ": label must have ", N, " elements, got ",
           shape_str(label.shape()));
  if (count.defined()) check_count(op, count, x1);
  MN_CHECK(label.device() == x1.device(), op, ": label on another device");
  Tensor lab = idx64(label.reshape({N}), op);
  TermResult r = alloc_terms(N, x1.dtype(), x1.device(), true);
  const int64_t D = x1.size(1);
  MN_DISPATCH_FLOAT(x1.dtype(), op, [&] {
    TermRows<scalar_t> rows;
    rows.Ea = x1.data<scalar_t>();
    rows.Ep = x2.data<scalar_t>();
    rows.ia = i1.defined() ? i1.data<int64_t>() : nullptr;
    rows.ip = i2.defined() ? i2.data<int64_t>() : nullptr;
    if (i1.defined() || i2.defined()) rows.rows = x1.size(0);  // x1 is x2 (see triplet_run)
    rows.count = count.defined() ? count.data<int64_t>() : nullptr;
    MN_DEVICE_CALL(op, x1.device(), contrastive_forward,
        form, margin, N, D, rows, lab.data<int64_t>(), outs<scalar_t>(r));
    reduce<scalar_t>(r, red, N, true, rows.count);
  });
  return r;
}
}  // namespace

TermResult contrastive_terms(ContrastiveForm form, double margin, const Tensor& x1,
                             const Tensor& x2, const Tensor& label, Reduction red) {
  const char* op = "contrastive_loss";
  check_emb(op, x1, "x1");
  check_emb(op, x2, "x2");
  check_same_shape(op, x1, x2);
  check_same_dtype(op, x1, x2);
  check_same_device(op, x1, x2);
  return contrastive_run(form, margin, x1.contiguous(), x2.contiguous(), Tensor(), Tensor(),
                         label, x1.size(0), red);
}

TermResult contrastive_terms_indexed(ContrastiveForm form, double margin, const Tensor& e,
                                     const Tensor& pairs, const Tensor& label, Reduction red,
                                     const Tensor& count) {
  const char* op = "contrastive_loss_indexed";
  check_emb(op, e, "embeddings");
  check_dim(op, pairs, 2, "pairs");
  MN_CHECK(pairs.size(1) == 2, op, ": pairs must be (P, 2), got ", shape_str(pairs.shape()));
  MN_CHECK(pairs.device() == e.device(), op, ": pairs on ", pairs.device().str(),
           ", embeddings on ", e.device().str());
  Tensor i64 = idx64(pairs, op);
  check_rows(i64, e.size(0), op);
  Tensor ec = e.contiguous();
  return contrastive_run(form, margin, ec, ec, col(i64, 0), col(i64, 1), label, pairs.size(0),
                         red, count.defined() ? count.contiguous().view({1}) : Tensor());
}

namespace {
template <typename T>
void apply_grad(int64_t N, int64_t D, const TermRows<T>& rows, const TermResult& res,
                const Tensor& g, T extra, T* ga, T* gp, T* gn, const Tensor& like) {
  const T* wn = res.wn.defined() ? res.wn.data<T>() : nullptr;
  if (like.is_cuda()) {
    MN_CUDA_BRANCH("loss_backward", like.device(), like.dtype(), {
      loss_apply_grad_cuda<T>(N, D, rows, res.wp.data<T>(), wn, g.data<T>(), res.stats.data<T>(),
                              extra, ga, gp, gn);
    });
  } else {
    loss_apply_grad_cpu<T>(N, D, rows, res.wp.data<T>(), wn, g.data<T>(), res.stats.data<T>(),
                           extra, ga, gp, gn);
  }
}
Tensor grad_scalar(const Tensor& grad_out, const Tensor& like) {
  MN_CHECK(grad_out.numel() == 1, "loss_backward: upstream gradient must have one element, got ",
           shape_str(grad_out.shape()));
  return grad_out.to(like.device()).to(like.dtype()).contiguous();
}
}  // namespace

std::vector<Tensor> triplet_loss_grad(const TermResult& res, const Tensor& grad_out,
                                      const Tensor& a, const Tensor& p, const Tensor& n,
                                      double extra) {
  Tensor ac = a.contiguous(), pc = p.contiguous(), nc = n.defined() ? n.contiguous() : Tensor();
  Tensor g = grad_scalar(grad_out, a);
  Tensor ga = Tensor::empty(a.shape(), a.dtype(), a.device());
  Tensor gp = Tensor::empty(a.shape(), a.dtype(), a.device());
  Tensor gn = nc.defined() ? Tensor::empty(a.shape(), a.dtype(), a.device()) : Tensor();
  MN_DISPATCH_FLOAT(a.dtype(), "loss_backward", [&] {
    TermRows<scalar_t> rows;
    rows.Ea = ac.data<scalar_t>();
    rows.Ep = pc.data<scalar_t>();
    rows.En = nc.defined() ? nc.data<scalar_t>() : nullptr;
    apply_grad<scalar_t>(a.size(0), a.size(1), rows, res, g, scalar_t(extra),
                         ga.data<scalar_t>(), gp.data<scalar_t>(),
                         gn.defined() ? gn.data<scalar_t>() : nullptr, a);
  });
  return {ga, gp, gn};
}

namespace {
// Accumulates the gradient of the terms into ge (B, D), contiguous.
void accumulate_grad_indexed(const TermResult& res, const Tensor& grad_out, const Tensor& e,
                             const Tensor& idx, double extra, Tensor& ge) {
  Tensor ec = e.contiguous();
  Tensor i64 = idx64(idx, "loss_backward");
  Tensor g = grad_scalar(grad_out, e);
  const bool pair = idx.size(1) == 2;
  Tensor ia = col(i64, 0), ip = col(i64, 1), in = pair ? Tensor() : col(i64, 2);
  MN_DISPATCH_FLOAT(e.dtype(), "loss_backward", [&] {
    TermRows<scalar_t> rows;
    rows.Ea = rows.Ep = ec.data<scalar_t>();
    rows.En = pair ? nullptr : ec.data<scalar_t>();
    rows.ia = ia.data<int64_t>();
    rows.ip = ip.data<int64_t>();
    rows.in = pair ? nullptr : in.data<int64_t>();
    rows.rows = ec.size(0);
    scalar_t* gp = ge.data<scalar_t>();
    apply_grad<scalar_t>(idx.size(0), e.size(1), rows, res, g, scalar_t(extra), gp, gp,
                         pair ? nullptr : gp, e);
  });
}
}  // namespace

Tensor triplet_loss_grad_indexed(const TermResult& res, const Tensor& grad_out, const Tensor& e,
                                 const Tensor& idx, double extra) {
  Tensor ge = Tensor::zeros(e.shape(), e.dtype(), e.device());
  accumulate_grad_indexed(res, grad_out, e, idx, extra, ge);
  return ge;
}

LmnnResult lmnn_terms(const Tensor& x, const Tensor& l, const Tensor& pairs,
                      const Tensor& triplets, double c, const Tensor& pair_count,
                      const Tensor& triplet_count) {
  const char* op = "lmnn_loss";
  check_emb(op, x, "x");
  check_emb(op, l, "L");
  check_same_dtype(op, x, l);
  check_same_device(op, x, l);
  MN_CHECK(x.size(1) == l.size(0), op, ": x ", shape_str(x.shape()), " and L ",
           shape_str(l.shape()), " do not chain (Z = X L)");
  LmnnResult r;
  const Fp32Scope fp32;  // a loss: never TF32 (kernels/gemm_config.h)
  r.z = matmul(x.contiguous(), l.contiguous());  // pass 1: (B, K)
  TripletLossParams pull;
  pull.kind = TripletKind::Pull;
  TripletLossParams push;
  push.kind = TripletKind::Schroff;
  push.margin = 1.0;
  push.weight = c;
  r.pull = triplet_loss_terms_indexed(pull, r.z, pairs, Reduction::Sum, pair_count);  // pass 2
  r.push = triplet_loss_terms_indexed(push, r.z, triplets, Reduction::Sum, triplet_count);
  r.stats = Tensor::empty({kStatsLen}, x.dtype(), x.device());
  MN_DISPATCH_FLOAT(x.dtype(), op, [&] {
    MN_DEVICE_CALL(op, x.device(), lmnn_stats_combine, r.pull.stats.data<scalar_t>(),
                   r.push.stats.data<scalar_t>(), r.stats.data<scalar_t>());
  });
  return r;
}

std::vector<Tensor> lmnn_grad(const LmnnResult& res, const Tensor& grad_out, const Tensor& x,
                              const Tensor& l, const Tensor& pairs, const Tensor& triplets,
                              double /*c: already folded into the push coefficients*/) {
  const Fp32Scope fp32;  // a loss: never TF32 (kernels/gemm_config.h)
  Tensor gz = Tensor::zeros(res.z.shape(), res.z.dtype(), res.z.device());
  accumulate_grad_indexed(res.pull, grad_out, res.z, pairs, 1.0, gz);
  accumulate_grad_indexed(res.push, grad_out, res.z, triplets, 1.0, gz);
  Tensor gx = matmul(gz, l.contiguous(), false, true);  // (B, K) (Din, K)^T -> (B, Din)
  Tensor gl = matmul(x.contiguous(), gz, true, false);  // (B, Din)^T (B, K) -> (Din, K)
  return {gx, gl};
}

LossStatsHost read_stats(const Tensor& stats) {
  std::vector<double> v = stats.to_double_vector();
  MN_CHECK(v.size() == static_cast<size_t>(kStatsLen), "read_stats: expected ", kStatsLen,
           " values, got ", v.size());
  LossStatsHost h;
  h.loss = v[0];
  h.active = v[1];
  h.mean_pos = v[2];
  h.mean_neg = v[3];
  return h;
}

KochResult koch_terms(const Tensor& h1, const Tensor& h2, const Tensor& alpha, const Tensor& bias,
                      const Tensor& target, Reduction red) {
  const char* op = "koch_bce_loss";
  check_emb(op, h1, "h1");
  check_same_shape(op, h1, h2);
  check_same_dtype(op, h1, h2);
  check_same_device(op, h1, h2);
  const int64_t N = h1.size(0), D = h1.size(1);
  MN_CHECK(alpha.numel() == D && bias.numel() == 1 && target.numel() == N, op,
           ": alpha must have ", D, " elements (got ", shape_str(alpha.shape()),
           "), bias 1 (got ", shape_str(bias.shape()), "), target ", N, " (got ",
           shape_str(target.shape()), ")");
  Tensor a = h1.contiguous(), b = h2.contiguous();
  Tensor al = alpha.to(h1.dtype()).contiguous(), bi = bias.to(h1.dtype()).contiguous();
  Tensor tg = target.to(h1.dtype()).contiguous();
  KochResult r;
  r.loss = Tensor::empty({N}, h1.dtype(), h1.device());
  r.dz = Tensor::empty({N}, h1.dtype(), h1.device());
  r.dist = Tensor::empty({N}, h1.dtype(), h1.device());
  r.is_pos = Tensor::empty({N}, DType::U8, h1.device());
  r.stats = Tensor::empty({kStatsLen}, h1.dtype(), h1.device());
  MN_DISPATCH_FLOAT(h1.dtype(), op, [&] {
    using T = scalar_t;
    if (h1.is_cuda()) {
      MN_CUDA_BRANCH(op, h1.device(), h1.dtype(), {
        koch_forward_cuda<T>(N, D, a.data<T>(), b.data<T>(), al.data<T>(), bi.data<T>(),
                             tg.data<T>(), r.loss.data<T>(), r.dz.data<T>(), r.dist.data<T>(),
                             r.is_pos.data<uint8_t>());
        loss_reduce_cuda<T>(red, N, r.loss.data<T>(), r.dist.data<T>(), nullptr,
                            r.is_pos.data<uint8_t>(), nullptr, r.stats.data<T>());
      });
    } else {
      koch_forward_cpu<T>(N, D, a.data<T>(), b.data<T>(), al.data<T>(), bi.data<T>(),
                          tg.data<T>(), r.loss.data<T>(), r.dz.data<T>(), r.dist.data<T>(),
                          r.is_pos.data<uint8_t>());
      loss_reduce_cpu<T>(red, N, r.loss.data<T>(), r.dist.data<T>(), nullptr,
                         r.is_pos.data<uint8_t>(), nullptr, r.stats.data<T>());
    }
  });
  return r;
}

std::vector<Tensor> koch_grad(const KochResult& res, const Tensor& grad_out, const Tensor& h1,
                              const Tensor& h2, const Tensor& alpha) {
  Tensor a = h1.contiguous(), b = h2.contiguous(), al = alpha.to(h1.dtype()).contiguous();
  Tensor g = grad_scalar(grad_out, h1);
  const int64_t N = h1.size(0), D = h1.size(1);
  Tensor g1 = Tensor::empty(h1.shape(), h1.dtype(), h1.device());
  Tensor g2 = Tensor::empty(h1.shape(), h1.dtype(), h1.device());
  Tensor ga = Tensor::empty({D}, h1.dtype(), h1.device());
  Tensor gb = Tensor::empty({1}, h1.dtype(), h1.device());
  MN_DISPATCH_FLOAT(h1.dtype(), "koch_bce_backward", [&] {
    using T = scalar_t;
    if (h1.is_cuda()) {
      MN_CUDA_BRANCH("koch_bce_backward", h1.device(), h1.dtype(), {
        koch_backward_cuda<T>(N, D, a.data<T>(), b.data<T>(), al.data<T>(), res.dz.data<T>(),
                              g.data<T>(), res.stats.data<T>(), g1.data<T>(), g2.data<T>(),
                              ga.data<T>(), gb.data<T>());
      });
    } else {
      koch_backward_cpu<T>(N, D, a.data<T>(), b.data<T>(), al.data<T>(), res.dz.data<T>(),
                           g.data<T>(), res.stats.data<T>(), g1.data<T>(), g2.data<T>(),
                           ga.data<T>(), gb.data<T>());
    }
  });
  return {g1, g2, ga, gb};
}

}  // namespace mn::kernels
