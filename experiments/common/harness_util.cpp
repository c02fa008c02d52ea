// The harness's small utilities (harness.h and harness_internal.h): file and
// folder checks (check_regular_file, is_directory, check_dir_usable, make_dirs),
// StepInputs and host_device_stats for the training step, Study::must_override,
// and the checkpoint metadata readers and writer (md_int, md_double, md_string,
// exact_text). It calls nothing else of the harness.
#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "experiments/common/harness_internal.h"
#include "runtime/error.h"

namespace mn::exp {

void check_regular_file(const std::string& path, const std::string& flag) {
  struct stat s;
  if (::stat(path.c_str(), &s) != 0)
    MN_THROW(flag, ": cannot open '", path, "': ", std::strerror(errno));
  if (!S_ISREG(s.st_mode)) MN_THROW(flag, ": '", path, "' is not a regular file (a directory?)");
}

void StepInputs::keep(size_t i, const Tensor& t) {
  MN_CHECK(t.defined(), "StepInputs::keep: slot ", i, ": undefined tensor");
  if (slots_.size() <= i) slots_.resize(i + 1);
  Tensor& d = slots_[i];
  if (t.is_cpu()) {  // no graph on the CPU: the slot takes t itself (no copy)
    d = t;
    return;
  }
  if (d.defined() && d.shape() == t.shape() && d.dtype() == t.dtype() && d.device() == t.device()) {
    d.copy_(t);
    return;
  }
  d = t.clone();
  ++generation_;
}

const Tensor& StepInputs::operator[](size_t i) const {
  MN_CHECK(i < slots_.size() && slots_[i].defined(), "StepInputs: slot ", i, " was never filled (prepare_step)");
  return slots_[i];
}

DeviceStats host_device_stats(const Stats& s) {
  DeviceStats d;
  std::vector<double> v;
  for (const auto& [k, x] : s) {
    d.names.push_back(k);
    v.push_back(x);
  }
  d.values = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  return d;
}

Stats Study::must_override(const char* hook) const {
  MN_THROW(name(), ": the study does not implement Study::", hook, "(), which its shape (",
           epoch_shaped() ? "epoch-shaped" : "custom run()", ") needs");
}

bool is_directory(const std::string& path) {
  struct stat s;
  return ::stat(path.c_str(), &s) == 0 && S_ISDIR(s.st_mode);
}

void check_dir_usable(const std::string& path, const std::string& flag) {
  struct stat s;
  if (::stat(path.c_str(), &s) == 0)
    MN_CHECK(S_ISDIR(s.st_mode), flag, " '", path, "' exists and is not a folder (a file?); give a folder");
}

void make_dirs(const std::string& path, const std::string& flag) {
  check_dir_usable(path, flag);
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    ::mkdir(cur.c_str(), 0755);
  }
  struct stat s;
  MN_CHECK(::stat(path.c_str(), &s) == 0 && S_ISDIR(s.st_mode), flag, ": cannot create the folder '", path, "'");
}

int64_t md_int(const nn::Metadata& md, const std::string& key, const std::string& file, int64_t lo, int64_t hi) {
  const std::string& s = md_string(md, key, file);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  MN_CHECK(!s.empty() && *end == '\0' && errno == 0, "checkpoint '", file, "': metadata '", key, "' = '", s,
           "' is not an integer (a damaged or foreign file?)");
  MN_CHECK(v >= lo && v <= hi, "checkpoint '", file, "': metadata '", key, "' = ", v, " is out of range [", lo, ", ",
           hi, "] (a damaged or foreign file?)");
  return v;
}

double md_double(const nn::Metadata& md, const std::string& key, const std::string& file) {
  const std::string& s = md_string(md, key, file);
  if (s == "null") return std::nan("");  // a metric that was not finite
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  MN_CHECK(!s.empty() && *end == '\0', "checkpoint '", file, "': metadata '", key, "' = '", s,
           "' is not a number (a damaged or foreign file?)");
  return v;
}

const std::string& md_string(const nn::Metadata& md, const std::string& key, const std::string& file) {
  auto it = md.find(key);
  MN_CHECK(it != md.end(), "checkpoint '", file, "' has no metadata '", key,
           "' (not written by this study, or by an older version)");
  return it->second;
}

std::string exact_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace mn::exp
