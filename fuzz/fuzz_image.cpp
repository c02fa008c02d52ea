// libFuzzer target: a user's image as metric_train and metric_embed read it
// (data::decode_image: PNG, JPEG with its Huffman tables checked first, BMP through
// stb_image asked for 3 channels; PGM through our parser), then the box resize.
#include "data/image_folder.h"
#include "fuzz/fuzz_common.h"

MN_FUZZ_TARGET({
  const mn::data::DecodedImage img = mn::data::decode_image(data, size, 3, "fuzz.img");
  if (img.pixels.size() != static_cast<size_t>(img.width) * static_cast<size_t>(img.height) * 3) __builtin_trap();
  if (static_cast<int64_t>(img.width) * img.height <= 4096)
    if (mn::data::resize_box_planar(img, 7).size() != 3 * 7 * 7) __builtin_trap();
})
