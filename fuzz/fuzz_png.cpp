// libFuzzer target: image decoding as data/ does it (data::decode_gray_image: PNG
// through stb_image with the 1-channel request, PGM through our parser; anything
// else refused before stb_image sees it).
#include "data/image_io.h"
#include "fuzz/fuzz_common.h"

MN_FUZZ_TARGET({
  mn::data::GrayImage g = mn::data::decode_gray_image(data, size, "fuzz.png");
  if (g.pixels.size() != static_cast<size_t>(g.width) * static_cast<size_t>(g.height)) __builtin_trap();
})
