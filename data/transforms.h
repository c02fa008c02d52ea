// Whole-dataset image transforms done once at load time:
//   * resize_area: area-averaging downscaling (PIL's BOX filter, OpenCV's
//     INTER_AREA): every output pixel is the mean of the input area it covers,
//     with fractional weights where a pixel straddles the border of that area.
//     So 105 -> 28 (a factor 3.75) neither aliases nor shifts the strokes.
//   * with_rotated_classes: 90/180/270-degree copies of every class as new
//     classes (a rotated character is a different character: Santoro et al.
//     2016, Vinyals et al. 2016); each rotation gets its own alphabets
//     ("<alphabet> (rot90)"), so within-alphabet sampling stays meaningful.
#pragma once
#include <cstdint>

#include "data/dataset.h"
#include "runtime/tensor.h"

namespace mn::data {

// (N, H, W) uint8 CPU -> (N, out_h, out_w) uint8, rounded to nearest. Upscaling
// is refused (this is a box filter, not an interpolator).
Tensor resize_area(const Tensor& images_u8, int64_t out_h, int64_t out_w);
// The dataset with every image resized (labels, names and files kept).
ImageDataset resized(const ImageDataset& ds, int64_t out_h, int64_t out_w);
// (N, S, S) uint8 rotated counter-clockwise by quarter_turns x 90 degrees.
Tensor rotate90(const Tensor& images_u8, int quarter_turns);
// 4x the classes: the originals, then all classes at 90, 180 and 270 degrees.
// Square images only.
ImageDataset with_rotated_classes(const ImageDataset& ds);

}  // namespace mn::data
