// Image gather (CPU loop + dispatch) and the triplet loader (GPU-resident images,
// CPU prefetch thread).
#include "data/loader.h"
#include "data/file_io.h"
#include "kernels/elementwise.h"

#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace mn::data {

template <typename T>
void gather_images_cpu(const uint8_t* src, int64_t N, int64_t plane, const int64_t* idx, int64_t B,
                       bool ink, T* out) {
  for (int64_t b = 0; b < B; ++b)
    MN_DATA_CHECK(idx[b] >= 0 && idx[b] < N, "gather_images: index ", idx[b], " out of range [0, ", N, ")");
  parallel_for(0, B, 8, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* s = src + idx[b] * plane;
      T* o = out + b * plane;
      for (int64_t k = 0; k < plane; ++k) {
        const T v = static_cast<T>(s[k]) / T(255);
        o[k] = ink ? T(1) - v : v;
      }
    }
  });
}
template void gather_images_cpu<float>(const uint8_t*, int64_t, int64_t, const int64_t*, int64_t, bool, float*);
template void gather_images_cpu<double>(const uint8_t*, int64_t, int64_t, const int64_t*, int64_t, bool, double*);

Tensor gather_images_float(const Tensor& images, const Tensor& idx, FloatMode mode, DType dtype) {
  check_dim("gather_images", images, 3, "images");
  MN_DATA_CHECK(images.dtype() == DType::U8, "gather_images: images must be uint8, got ", images.desc());
  MN_DATA_CHECK(idx.dtype() == DType::I64 && idx.dim() == 1, "gather_images: idx must be (B) int64, got ",
           idx.desc());
  check_same_device("gather_images", images, idx);
  Tensor x = images.contiguous(), ix = idx.contiguous();
  const int64_t B = ix.numel(), H = x.size(1), W = x.size(2);
  Tensor out = Tensor::empty({B, 1, H, W}, dtype, x.device());
  if (B == 0) return out;
  const bool ink = mode == FloatMode::Ink01;
  MN_DISPATCH_FLOAT(dtype, "gather_images", [&] {
    MN_DEVICE_CALL("gather_images", x.device(), gather_images,
        x.data<uint8_t>(), x.size(0), H * W, ix.data<int64_t>(), B, ink,
        out.data<scalar_t>());
  });
  return out;
}

TripletLoader::TripletLoader(const ImageDataset& ds, const TripletLoaderOptions& opt)
    : opt_(opt), classes_(ds.labels), gen_(opt.seed, opt.offset) {
  ds.validate("TripletLoader");
  MN_DATA_CHECK(opt.batch_size >= 1, "TripletLoader: batch_size must be >= 1");
  images_ = ds.images.to(opt.device);  // the one upload of the whole set
  if (opt.sampling != TripletSampling::Random) {
    const int64_t N = ds.size();
    ssim_images_ = gather_images_float(images_, Tensor::arange(N, DType::I64, opt.device), opt.mode)
                       .view({N, ds.height(), ds.width()});
  }
  if (opt.prefetch && opt.device.is_cpu()) worker_ = std::thread([this] { producer_loop(); });
}

TripletLoader::~TripletLoader() {
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
}

TripletBatch TripletLoader::make_batch() {
  TripletBatch b;
  const int64_t B = opt_.batch_size;
  const bool mine_p = opt_.sampling == TripletSampling::SsimMined ||
                      opt_.sampling == TripletSampling::SsimHardPositive;
  const bool mine_n = opt_.sampling == TripletSampling::SsimMined ||
                      opt_.sampling == TripletSampling::SsimSemiHardNegative;
  b.triplets = opt_.sampling == TripletSampling::Random
                   ? sample_random_triplets(classes_, B, gen_)
                   : sample_ssim_triplets(classes_, ssim_images_, 1.0, B, gen_, mine_p, mine_n);
  std::vector<int64_t> a, p, n;
  split_triplets(b.triplets, a, p, n);
  // The shard's rows of the (anchors; positives; negatives) stack of the whole batch.
  const int64_t first = opt_.shard_first, S = opt_.shard_count < 0 ? B - first : opt_.shard_count;
  MN_CHECK(first >= 0 && S >= 1 && first + S <= B, "TripletLoader: shard [", first, ", ", first + S,
           ") of a batch of ", B, " triplets");
  std::vector<int64_t> rows, mine;
  for (int64_t g = 0; g < 3; ++g)
    for (int64_t i = first; i < first + S; ++i) rows.push_back(g * B + i);
  for (int64_t r : rows) mine.push_back(r < B ? a[r] : r < 2 * B ? p[r - B] : n[r - 2 * B]);
  Tensor idx = Tensor::from_vector(mine, {3 * S}, opt_.device);
  Tensor x = gather_images_float(images_, idx, opt_.mode);  // (3S, 1, H, W)
  const int64_t H = images_.size(1), W = images_.size(2);
  if (opt_.augment) {
    // Outside the image is paper: 0 in Ink01, 1 in Gray01. Drawn for the whole batch.
    const double fill = opt_.mode == FloatMode::Ink01 ? 0.0 : 1.0;
    const auto all = draw_koch_affines(3 * B, H, W, opt_.augment_options, gen_);
    std::vector<Affine2D> params;
    for (int64_t r : rows) params.push_back(all[static_cast<size_t>(r)]);
    x = affine_warp(x.view({3 * S, H, W}), params, fill).view({3 * S, 1, H, W});
  }
  if (opt_.scale != 1.0) x = kernels::mul_scalar(x, opt_.scale);
  b.offset_after = gen_.offset();
  b.anchor = x.narrow(0, 0, S);
  b.positive = x.narrow(0, S, S);
  b.negative = x.narrow(0, 2 * S, S);
  return b;
}

void TripletLoader::producer_loop() {
  while (true) {
    TripletBatch b;
    try {
      b = make_batch();
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      error_ = std::current_exception();
      has_batch_ = true;
      cv_.notify_all();
      return;
    }
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return !has_batch_ || stop_; });
    if (stop_) return;
    slot_ = std::move(b);
    has_batch_ = true;
    cv_.notify_all();
  }
}

TripletBatch TripletLoader::next() {
  if (!worker_.joinable()) return make_batch();
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [this] { return has_batch_; });
  if (error_) std::rethrow_exception(error_);
  TripletBatch b = std::move(slot_);
  has_batch_ = false;
  cv_.notify_all();
  return b;
}

}  // namespace mn::data
