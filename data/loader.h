// Batch assembly for training.
//   * gather_images_float: index_select of (N, H, W) uint8 images into a
//     (B, 1, H, W) float batch with the pixel convention of data/image_io.h
//     (Ink01 or Gray01), CPU loop or our CUDA kernel (data/cuda/gather.cu).
//   * TripletLoader: triplet batches (random or SSIM-mined), optionally Koch-
//     augmented. On a CUDA device the whole uint8 image set is uploaded once at
//     construction and every batch is gathered (and warped) on the device: per
//     step only the index list (3 x B int64) and the augmentation parameters
//     (24 bytes per image) go up. On the CPU a background thread assembles the
//     next batch while the caller trains on the current one.
// Batches are a deterministic function of the seed (the producer owns the
// Generator and produces batches strictly in order).
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "data/augment.h"
#include "data/dataset.h"
#include "data/image_io.h"
#include "data/samplers.h"

namespace mn::data {

template <typename T>
void gather_images_cpu(const uint8_t* src,   // (N, H*W)
                       int64_t N, int64_t plane,
                       const int64_t* idx,   // (B)
                       int64_t B, bool ink, T* out);  // (B, H*W)
#ifdef MN_WITH_CUDA
template <typename T>
void gather_images_cuda(const uint8_t* src, int64_t N, int64_t plane, const int64_t* idx, int64_t B,
                        bool ink, T* out);
#endif

// images (N, H, W) uint8 and idx (B) int64 on the same device -> (B, 1, H, W).
Tensor gather_images_float(const Tensor& images_u8, const Tensor& idx, FloatMode mode,
                           DType dtype = DType::F32);

struct TripletBatch {
  std::vector<Triplet> triplets;       // the whole batch's
  Tensor anchor, positive, negative;  // (B, 1, H, W) float32 on the loader's device (the shard's rows)
  // The loader generator's offset right after this batch was drawn: a new loader
  // built with (seed, offset_after) continues exactly with the next batch
  // (prefetching does not disturb this, so runs resume exactly).
  uint64_t offset_after = 0;
};

// SsimMined mines both; SsimHardPositive only the positive; SsimSemiHardNegative
// only the negative (the other drawn at random).
enum class TripletSampling { Random, SsimMined, SsimHardPositive, SsimSemiHardNegative };

struct TripletLoaderOptions {
  int64_t batch_size = 128;
  Device device = Device::cpu();
  uint64_t seed = 0;
  uint64_t offset = 0;  // the generator's starting offset (to resume a run)
  FloatMode mode = FloatMode::Ink01;
  double scale = 1.0;   // multiplies the [0, 1] pixels (e.g. 255 for raw intensities)
  bool augment = false;
  KochAugmentOptions augment_options;
  TripletSampling sampling = TripletSampling::Random;
  bool prefetch = true;  // CPU only: assemble the next batch in a background thread
  // A data-parallel rank's shard: the whole batch's triplets (and augmentations) are
  // drawn, but only triplets [shard_first, shard_first + shard_count) are gathered,
  // warped and returned (shard_count -1: all). The generator advances as for the
  // whole batch, so every rank's stream stays the 1-process stream.
  int64_t shard_first = 0, shard_count = -1;
};

class TripletLoader {
 public:
  TripletLoader(const ImageDataset& ds, const TripletLoaderOptions& opt);
  ~TripletLoader();
  TripletLoader(const TripletLoader&) = delete;
  TripletLoader& operator=(const TripletLoader&) = delete;

  TripletBatch next();
  const Tensor& device_images() const { return images_; }  // (N, H, W) uint8 on the device

 private:
  TripletBatch make_batch();
  void producer_loop();

  TripletLoaderOptions opt_;
  ClassIndex classes_;
  Tensor images_;      // uint8, on opt_.device
  Tensor ssim_images_; // float copy for SSIM mining (on the device), when used
  Generator gen_;
  // One-slot prefetch queue (CPU).
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool has_batch_ = false, stop_ = false;
  TripletBatch slot_;
  std::exception_ptr error_;
};

}  // namespace mn::data
