// A small synthetic image folder for the image-folder tests (data/ and experiments/):
// ROOT/<class>/<i>.png, grey PNGs of `size` x `size` whose class is a horizontal bar at
// a class-specific height plus per-image noise, so that classes are learnable and
// images of one class are not identical.
#pragma once
#include <filesystem>
#include <random>
#include <string>

#include "data/image_io.h"

namespace mn::test {

inline void make_image_folder(const std::string& root, int classes, int per_class, int size, unsigned seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(0, 60);
  for (int c = 0; c < classes; ++c) {
    const std::string dir = root + "/class" + std::to_string(10 + c);  // names sort like their numbers
    std::filesystem::create_directories(dir);
    for (int i = 0; i < per_class; ++i) {
      data::GrayImage img;
      img.height = img.width = size;
      img.pixels.resize(size_t(size) * size_t(size));
      const int bar = (c * size) / classes;
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x) {
          const bool on = y >= bar && y < bar + std::max(1, size / classes);
          img.pixels[size_t(y) * size_t(size) + size_t(x)] = static_cast<uint8_t>(on ? 255 - noise(rng) : noise(rng));
        }
      data::write_png_gray(dir + "/" + std::to_string(i) + ".png", img);
    }
  }
}

}  // namespace mn::test
