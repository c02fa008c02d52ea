// Data-pipeline benchmarks: cold PNG decode and cached load of Omniglot's
// background set, the listing scan that keys the cache, and triplet-batch
// assembly (random sampling, with/without Koch augmentation; SSIM-mined) on the
// CPU and, when present, the GPU. Each case checks its result before timing.
// Data: $MN_DATA_DIR, ./datasets or ../shared/datasets (run from the repo root).
// Cache: data::default_cache_dir() ($MN_CACHE_DIR, else the user's cache folder).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>

#include "data/loader.h"
#include "data/omniglot.h"
#include "runtime/device.h"

using namespace mn;
using namespace mn::data;

namespace {
std::string bg_dir() {
  std::string o = find_dataset_dir("omniglot");
  return o.empty() ? "" : o + "/images_background";
}
std::string cache_dir() { return mn::data::default_cache_dir(); }
const ImageDataset& background() {
  static std::unique_ptr<ImageDataset> ds;
  if (!ds) {
    OmniglotLoadOptions o;
    o.cache_dir = cache_dir();
    ds = std::make_unique<ImageDataset>(load_omniglot_set(bg_dir(), o));
  }
  return *ds;
}

void BM_OmniglotColdDecode(benchmark::State& st) {
  if (bg_dir().empty()) return st.SkipWithError("omniglot not found");
  for (auto _ : st) {
    ImageDataset ds = load_omniglot_set(bg_dir(), {});
    if (ds.size() != 19280) return st.SkipWithError("unexpected image count");
    benchmark::DoNotOptimize(ds.images.raw_data());
  }
  st.SetItemsProcessed(st.iterations() * 19280);
}
BENCHMARK(BM_OmniglotColdDecode)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

void BM_OmniglotListingScan(benchmark::State& st) {
  if (bg_dir().empty()) return st.SkipWithError("omniglot not found");
  for (auto _ : st) benchmark::DoNotOptimize(omniglot_listing_hash(bg_dir()));
}
BENCHMARK(BM_OmniglotListingScan)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_OmniglotCachedLoad(benchmark::State& st) {
  if (bg_dir().empty()) return st.SkipWithError("omniglot not found");
  OmniglotLoadOptions o;
  o.cache_dir = cache_dir();
  load_omniglot_set(bg_dir(), o);  // builds the pack if needed (not timed)
  for (auto _ : st) {
    ImageDataset ds = load_omniglot_set(bg_dir(), o);
    if (omniglot_last_cache_action() != 1 || ds.size() != 19280)
      return st.SkipWithError("cache not used");
    benchmark::DoNotOptimize(ds.images.raw_data());
  }
  st.SetItemsProcessed(st.iterations() * 19280);
}
BENCHMARK(BM_OmniglotCachedLoad)->Unit(benchmark::kMillisecond)->UseRealTime();

// Triplet batches of 128 (384 images of 105x105): args = (augment, device 0 cpu / 1 cuda).
void BM_TripletBatch(benchmark::State& st) {
  if (bg_dir().empty()) return st.SkipWithError("omniglot not found");
  const bool aug = st.range(0) != 0, gpu = st.range(1) != 0;
  if (gpu && !cuda_available()) return st.SkipWithError("no CUDA device");
  TripletLoaderOptions o;
  o.batch_size = 128;
  o.augment = aug;
  o.device = gpu ? Device::cuda() : Device::cpu();
  o.prefetch = false;  // time the assembly itself
  TripletLoader loader(background(), o);
  TripletBatch b = loader.next();
  if (b.anchor.size(0) != 128 || b.anchor.size(2) != 105) return st.SkipWithError("bad batch");
  for (auto _ : st) {
    b = loader.next();
    synchronize(o.device);
  }
  st.SetItemsProcessed(st.iterations() * 3 * 128);  // images per second
}
BENCHMARK(BM_TripletBatch)->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
// SSIM-mined triplet batches of 32 (each anchor scored against its own class
// and one other class: ~39 SSIMs of 105x105 per triplet); arg = device.
void BM_SsimMinedBatch(benchmark::State& st) {
  if (bg_dir().empty()) return st.SkipWithError("omniglot not found");
  const bool gpu = st.range(0) != 0;
  if (gpu && !cuda_available()) return st.SkipWithError("no CUDA device");
  TripletLoaderOptions o;
  o.batch_size = 32;
  o.sampling = TripletSampling::SsimMined;
  o.device = gpu ? Device::cuda() : Device::cpu();
  o.prefetch = false;
  TripletLoader loader(background(), o);
  TripletBatch b = loader.next();
  if (b.triplets.size() != 32) return st.SkipWithError("bad batch");
  for (auto _ : st) {
    b = loader.next();
    synchronize(o.device);
  }
  st.SetItemsProcessed(st.iterations() * 32);  // triplets per second
}
BENCHMARK(BM_SsimMinedBatch)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
}  // namespace

BENCHMARK_MAIN();
