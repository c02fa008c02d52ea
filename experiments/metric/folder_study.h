// metric_train: metric learning on a user's own images (data/image_folder.h) --
// any trunk, any loss and miner of the registries, P x K batches from the training
// classes, validated on held-out classes with the retrieval metrics of
// pytorch-metric-learning's AccuracyCalculator (Recall@K, MAP@R, R-precision) and
// N-way one-shot accuracy (experiments/common/retrieval.h), tested once on the test
// classes with the best-validation model. The harness gives it the run folder
// (metrics, summary, report, learning curve, best and last checkpoints), --resume and
// --time-limit.
//
// The model is the trunk alone (its parameter names, e.g. block1.conv.weight, are the
// checkpoint's; docs/checkpoints.md), so metric_embed and tools/load_in_torch.py load
// it back; the checkpoint's configuration says how its inputs were made (channels,
// image size, --invert).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/image_folder.h"
#include "experiments/common/harness.h"
#include "nn/module.h"

namespace mn::exp {

std::unique_ptr<Study> make_metric_folder_study();

// The trunk a run's flags describe (--trunk, --channels, --image-size, --embedding,
// --width, --hidden), built with `g`'s initial weights; shared by metric_embed.
std::shared_ptr<nn::Module> make_folder_trunk(const Flags& f, Generator& g, Device device);
// The network's input: (N, C, S, S) uint8 -> float32 in [0, 1] (Gray01: white 1), or
// with --invert the ink convention (1 - v / 255: dark strokes on white paper become 1).
Tensor folder_inputs(const Tensor& images_u8, bool invert, Device device);
// The distance a run scores with: cosine for a loss trained on cosine similarity
// (multi-similarity), else Euclidean; --distance overrides it.
bool folder_uses_cosine(const Flags& f);
// Embeds (N, C, S, S) uint8 images in chunks of `batch` (no gradient, eval mode).
Tensor embed_images(nn::Module& trunk, const Tensor& images_u8, bool invert, Device device, int64_t batch);

}  // namespace mn::exp
