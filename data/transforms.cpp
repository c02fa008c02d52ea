// Area resize and rotated classes (see transforms.h).
#include "data/transforms.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "data/file_io.h"
#include "runtime/parallel.h"

namespace mn::data {
namespace {

// One output pixel's input taps along an axis: [first, first + w.size()) with weights summing to 1.
struct Taps {
  int64_t first = 0;
  std::vector<double> w;
};

std::vector<Taps> area_taps(int64_t in, int64_t out) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  std::vector<Taps> taps(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const double lo = o * scale, hi = (o + 1) * scale;
    Taps& t = taps[static_cast<size_t>(o)];
    t.first = static_cast<int64_t>(std::floor(lo));
    const int64_t last = std::min(in - 1, static_cast<int64_t>(std::ceil(hi)) - 1);
    for (int64_t i = t.first; i <= last; ++i) {
      const double cover = std::min(hi, static_cast<double>(i + 1)) - std::max(lo, static_cast<double>(i));
      t.w.push_back(cover > 0 ? cover / scale : 0.0);
    }
  }
  return taps;
}

}  // namespace

Tensor resize_area(const Tensor& images_u8, int64_t out_h, int64_t out_w) {
  MN_DATA_CHECK(images_u8.defined() && images_u8.dim() == 3 && images_u8.dtype() == DType::U8 && images_u8.is_cpu(),
                "resize_area: expected (N, H, W) uint8 images on the CPU, got ",
                images_u8.defined() ? images_u8.desc() : std::string("none"));
  const int64_t n = images_u8.size(0), h = images_u8.size(1), w = images_u8.size(2);
  MN_DATA_CHECK(out_h >= 1 && out_w >= 1 && out_h <= h && out_w <= w, "resize_area: cannot resize ", h, "x", w,
                " images to ", out_h, "x", out_w, " (area averaging only shrinks; sizes must be 1..", h, "x", w, ")");
  Tensor src = images_u8.contiguous();
  Tensor out = Tensor::empty({n, out_h, out_w}, DType::U8);
  if (out_h == h && out_w == w) {
    std::memcpy(out.data<uint8_t>(), src.data<uint8_t>(), static_cast<size_t>(n * h * w));
    return out;
  }
  const std::vector<Taps> ty = area_taps(h, out_h), tx = area_taps(w, out_w);
  const uint8_t* src_all = src.data<uint8_t>();
  uint8_t* dst_all = out.data<uint8_t>();
  // Images are independent: chunks of them in parallel, each with its own row buffer.
  parallel_for(0, n, 64, [&](int64_t i0, int64_t i1) {
    std::vector<double> rows(static_cast<size_t>(h * out_w));  // horizontal pass of one image
    for (int64_t img = i0; img < i1; ++img) {
      const uint8_t* s = src_all + img * h * w;
      uint8_t* d = dst_all + img * out_h * out_w;
      for (int64_t y = 0; y < h; ++y)
        for (int64_t ox = 0; ox < out_w; ++ox) {
          const Taps& t = tx[static_cast<size_t>(ox)];
          double acc = 0;
          for (size_t k = 0; k < t.w.size(); ++k) acc += t.w[k] * s[y * w + t.first + static_cast<int64_t>(k)];
          rows[static_cast<size_t>(y * out_w + ox)] = acc;
        }
      for (int64_t oy = 0; oy < out_h; ++oy) {
        const Taps& t = ty[static_cast<size_t>(oy)];
        for (int64_t ox = 0; ox < out_w; ++ox) {
          double acc = 0;
          for (size_t k = 0; k < t.w.size(); ++k)
            acc += t.w[k] * rows[static_cast<size_t>((t.first + static_cast<int64_t>(k)) * out_w + ox)];
          d[oy * out_w + ox] = static_cast<uint8_t>(std::lround(std::min(255.0, std::max(0.0, acc))));
        }
      }
    }
  });
  return out;
}

ImageDataset resized(const ImageDataset& ds, int64_t out_h, int64_t out_w) {
  ImageDataset out = ds;
  out.images = resize_area(ds.images, out_h, out_w);
  return out;
}

Tensor rotate90(const Tensor& images_u8, int quarter_turns) {
  MN_DATA_CHECK(images_u8.dim() == 3 && images_u8.dtype() == DType::U8 && images_u8.is_cpu() &&
                    images_u8.size(1) == images_u8.size(2),
                "rotate90: expected square (N, S, S) uint8 images on the CPU, got ", images_u8.desc());
  const int64_t n = images_u8.size(0), S = images_u8.size(1);
  const int q = ((quarter_turns % 4) + 4) % 4;
  Tensor src = images_u8.contiguous();
  Tensor out = Tensor::empty({n, S, S}, DType::U8);
  const uint8_t* s = src.data<uint8_t>();
  uint8_t* d = out.data<uint8_t>();
  for (int64_t i = 0; i < n; ++i, s += S * S, d += S * S)
    for (int64_t y = 0; y < S; ++y)
      for (int64_t x = 0; x < S; ++x) {
        // Counter-clockwise: output (y, x) reads the input pixel that rotates onto it.
        int64_t sy = y, sx = x;
        if (q == 1) sy = x, sx = S - 1 - y;
        else if (q == 2) sy = S - 1 - y, sx = S - 1 - x;
        else if (q == 3) sy = S - 1 - x, sx = y;
        d[y * S + x] = s[sy * S + sx];
      }
  return out;
}

ImageDataset with_rotated_classes(const ImageDataset& ds) {
  ds.validate("with_rotated_classes");
  MN_DATA_CHECK(ds.height() == ds.width(), "with_rotated_classes: rotations need square images, got ", ds.height(),
                "x", ds.width());
  ImageDataset out = ds;
  if (out.class_alphabet.empty()) {  // no alphabets: each rotation becomes one group
    out.alphabet_names = {"rot0"};
    out.class_alphabet.assign(out.class_names.size(), 0);
  }
  for (int q = 1; q < 4; ++q) {
    const std::string tag = " (rot" + std::to_string(90 * q) + ")";
    ImageDataset r = ds;
    r.images = rotate90(ds.images, q);
    for (auto& c : r.class_names) c += tag;
    for (auto& a : r.alphabet_names) a += tag;
    for (auto& f : r.files) f += tag;
    if (r.class_alphabet.empty()) {
      r.alphabet_names = {"rot" + std::to_string(90 * q)};
      r.class_alphabet.assign(r.class_names.size(), 0);
    }
    out = concat(out, r);
  }
  return out;
}

}  // namespace mn::data
