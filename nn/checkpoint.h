// Checkpoints as safetensors files (https://github.com/huggingface/safetensors):
//
//   bytes 0..7   N, the header length, unsigned 64-bit little-endian
//   bytes 8..8+N JSON header: {"__metadata__": {string: string},
//                  "<name>": {"dtype": "F32"|"F64"|"I32"|"I64"|"U8",
//                             "shape": [d0, d1, ...],
//                             "data_offsets": [begin, end]}, ...}
//                padded with spaces so that 8 + N is a multiple of 8
//   then         the raw little-endian tensor bytes, row-major; offsets are
//                relative to the start of this data block, tensors are laid
//                out back to back in sorted name order with no gaps.
// PyTorch's `safetensors` package opens these files (safe_open / load_file).
//
// Tensor names in a MetricNet checkpoint (save_checkpoint):
//   <dotted module path>        parameters and buffers exactly as
//                               Module::named_parameters()/named_buffers() name
//                               them, e.g. "branch.conv1.weight",
//                               "branch.bn1.running_mean" (no prefix, so a
//                               PyTorch state_dict with the same layout matches)
//   optim.<group>.<...>         optimizer state, see nn/optim/optimizer.h
// Metadata (all values are strings): "format" = "metricnet-checkpoint-v1",
// "optimizer" = its kind, plus whatever the caller passes (epoch, RNG state via
// put_generator_state, the run's configuration).
//
// Files are written atomically: a temporary file in the same directory, fsync,
// rename over the target, fsync of the directory. A crash leaves either the old
// or the new checkpoint, never a torn one.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "nn/optim/optimizer.h"
#include "runtime/rng.h"
#include "runtime/tensor.h"

namespace mn::nn {

using Metadata = std::map<std::string, std::string>;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Writes `tensors` (any devices; copied to the host explicitly) and `metadata`.
// Names must be unique and non-empty, and must not be "__metadata__".
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const Metadata& metadata = {});

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;  // CPU tensors
  Metadata metadata;
};
// Reads and validates a whole file; errors name the file and the tensor
// (not a regular file, truncated file, bad JSON, unknown dtype, size or offset
// mismatch). The JSON header is parsed with nlohmann-json.
SafetensorsFile read_safetensors(const std::string& path);
// Only the header's metadata (cheap: the tensor data is not read).
Metadata read_safetensors_metadata(const std::string& path);
// Only the tensors' names and shapes from the header (cheap; sizes and offsets
// are checked by read_safetensors).
std::map<std::string, Shape> read_safetensors_shapes(const std::string& path);

// Module parameters + buffers + optimizer state (when `opt` is given) + metadata.
void save_checkpoint(const std::string& path, Module& model, const Optimizer* opt = nullptr,
                     const Metadata& metadata = {});
// Copies the file's tensors into the existing parameters, buffers and optimizer
// state (keeping their devices and Variable identities). Every parameter and
// buffer must be present with the same shape and dtype; returns the metadata.
Metadata load_checkpoint(const std::string& path, Module& model, Optimizer* opt = nullptr);

// RNG state in metadata: "<key>.seed" and "<key>.offset" as decimal strings.
void put_generator_state(Metadata& md, const std::string& key, const Generator& g);
// Throws naming the key (and `file` when given) when absent or malformed.
void get_generator_state(const Metadata& md, const std::string& key, Generator& g, const std::string& file = "");

// safetensors dtype strings ("F32", ...) and back.
const char* safetensors_dtype(DType t);
DType parse_safetensors_dtype(const std::string& s, const std::string& context);

}  // namespace mn::nn
