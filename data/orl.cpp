// ORL faces folder reader.
#include "data/orl.h"
#include "data/file_io.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "data/image_io.h"

namespace fs = std::filesystem;

namespace mn::data {

namespace {
// "s12" -> 12, "7.pgm" -> 7 (numeric order, not lexicographic); -1 otherwise
// (also for digit strings too long for a number, which used to overflow).
long number_in(const std::string& s, size_t from, size_t to) {
  int64_t v = 0;
  if (from >= to || !parse_int_in_range(s.substr(from, to - from), 0, INT32_MAX, &v)) return -1;
  return static_cast<long>(v);
}
}  // namespace

ImageDataset load_orl_faces(const std::string& dir) {
  std::error_code ec;
  MN_DATA_CHECK(fs::is_directory(dir, ec), "load_orl_faces: missing folder '", dir,
                "' (fetch it with data/fetch.sh get orl_faces, or set MN_DATA_DIR)");
  std::vector<std::pair<long, std::string>> subjects;
  for (const auto& e : list_dir(dir, "load_orl_faces")) {
    std::string n = e.path().filename().string();
    long k = n.size() > 1 && n[0] == 's' ? number_in(n, 1, n.size()) : -1;
    std::error_code dec;
    if (e.is_directory(dec) && k >= 0) subjects.emplace_back(k, n);
  }
  std::sort(subjects.begin(), subjects.end());
  MN_DATA_CHECK(!subjects.empty(), "load_orl_faces: '", dir, "' holds no sNN subject folders");
  ImageDataset ds;
  std::vector<GrayImage> imgs;
  for (const auto& [k, name] : subjects) {
    std::vector<std::pair<long, std::string>> files;
    for (const auto& e : list_dir(fs::path(dir) / name, "load_orl_faces")) {
      std::string n = e.path().filename().string();
      if (n.size() > 4 && n.compare(n.size() - 4, 4, ".pgm") == 0 &&
          regular_file_or_warn(e, "load_orl_faces"))
        files.emplace_back(number_in(n, 0, n.size() - 4), n);
    }
    std::sort(files.begin(), files.end());
    MN_DATA_CHECK(!files.empty(), "load_orl_faces: subject folder '", (fs::path(dir) / name).string(),
             "' holds no PGM files");
    const int32_t cls = static_cast<int32_t>(ds.class_names.size());
    ds.class_names.push_back(name);
    for (const auto& f : files) {
      const std::string rel = name + "/" + f.second;
      const std::string path = (fs::path(dir) / rel).string();
      imgs.push_back(read_gray_image(path));
      MN_DATA_CHECK(imgs.back().height == imgs[0].height && imgs.back().width == imgs[0].width,
               "load_orl_faces: '", path, "': wrong image size ", imgs.back().height, "x",
               imgs.back().width, ", expected ", imgs[0].height, "x", imgs[0].width);
      ds.labels.push_back(cls);
      ds.files.push_back(rel);
    }
  }
  const int64_t N = static_cast<int64_t>(imgs.size()), H = imgs[0].height, W = imgs[0].width;
  ds.images = Tensor::empty({N, H, W}, DType::U8);
  for (int64_t i = 0; i < N; ++i)
    std::memcpy(ds.images.data<uint8_t>() + i * H * W, imgs[i].pixels.data(), static_cast<size_t>(H * W));
  return ds;
}

}  // namespace mn::data
