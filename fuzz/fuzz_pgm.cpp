// libFuzzer target: our own PGM parser (P2 ASCII and P5 binary).
#include "data/image_io.h"
#include "fuzz/fuzz_common.h"

MN_FUZZ_TARGET({
  mn::data::GrayImage g = mn::data::decode_pgm(data, size, "fuzz.pgm");
  if (g.pixels.size() != static_cast<size_t>(g.width) * static_cast<size_t>(g.height)) __builtin_trap();
})
