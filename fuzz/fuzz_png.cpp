// libFuzzer target: image decoding through stb_image (PNG, also JPEG/BMP/PNM
// as the library enables them) with the 1-channel request data/ uses.
#include "data/image_io.h"
#include "fuzz/fuzz_common.h"

MN_FUZZ_TARGET({
  mn::data::GrayImage g = mn::data::decode_gray_image(data, size, "fuzz.png");
  if (g.pixels.size() != static_cast<size_t>(g.width) * static_cast<size_t>(g.height)) __builtin_trap();
})
