// safetensors reader/writer (nlohmann-json for the header) and the
// checkpoint save/load of module + optimizer state (nn/checkpoint.h).
#include "nn/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace mn::nn {

static_assert(sizeof(double) == 8 && sizeof(float) == 4, "IEEE-754 types expected");

namespace {

bool host_is_little_endian() {
  const uint16_t x = 1;
  uint8_t b;
  std::memcpy(&b, &x, 1);
  return b == 1;
}

// ---- JSON ------------------------------------------------------------------------
// The header is read and written with nlohmann-json (Debian nlohmann-json3-dev);
// ordered_json keeps "__metadata__" first and the tensors in file order, so the
// header bytes are exactly the ones the spec example shows.
using Json = nlohmann::ordered_json;

uint64_t json_uint(const Json& v, const std::string& file, const std::string& what) {
  MN_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0), "read_safetensors: '",
           file, "': ", what, " must be a non-negative integer, got ", v.dump());
  return v.get<uint64_t>();
}

// ---- file helpers ----------------------------------------------------------------------

std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void write_all(int fd, const void* data, size_t n, const std::string& tmp) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      MN_THROW("write_safetensors: writing '", tmp, "' failed: ", std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
  }
  return "?";
}

DType parse_safetensors_dtype(const std::string& s, const std::string& context) {
  if (s == "F32") return DType::F32;
  if (s == "F64") return DType::F64;
  if (s == "I32") return DType::I32;
  if (s == "I64") return DType::I64;
  if (s == "U8") return DType::U8;
  MN_THROW(context, ": unsupported safetensors dtype '", s,
           "' (MetricNet reads F32, F64, I32, I64, U8)");
}

// ---- write ----------------------------------------------------------------------------

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const Metadata& metadata) {
  MN_CHECK(host_is_little_endian(), "write_safetensors: big-endian hosts are not supported");
  // Sorted by name; the data block follows the same order.
  std::vector<std::pair<std::string, Tensor>> sorted(tensors.begin(), tensors.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < sorted.size(); ++i) {
    MN_CHECK(!sorted[i].first.empty() && sorted[i].first != "__metadata__",
             "write_safetensors: '", path, "': invalid tensor name '", sorted[i].first, "'");
    MN_CHECK(i == 0 || sorted[i].first != sorted[i - 1].first, "write_safetensors: '", path,
             "': tensor name '", sorted[i].first, "' used twice");
    MN_CHECK(sorted[i].second.defined(), "write_safetensors: '", path, "': tensor '",
             sorted[i].first, "' is undefined");
  }
  Json js = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    js["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  std::vector<Tensor> host;  // contiguous CPU copies, in file order
  host.reserve(sorted.size());
  for (const auto& [name, t] : sorted) {
    Tensor h = t.contiguous().cpu();  // explicit, counted device-to-host copy when on a GPU
    Json e = Json::object();
    e["dtype"] = safetensors_dtype(h.dtype());
    e["shape"] = Json::array();
    for (int64_t d = 0; d < h.dim(); ++d) e["shape"].push_back(h.size(d));
    e["data_offsets"] = Json::array({offset, offset + h.nbytes()});
    js[name] = std::move(e);
    offset += h.nbytes();
    host.push_back(std::move(h));
  }
  std::string header;
  try {
    header = js.dump();
  } catch (const nlohmann::json::exception& e) {
    MN_THROW("write_safetensors: '", path, "': a tensor name or metadata value is not valid UTF-8 (", e.what(), ")");
  }
  header.append((8 - header.size() % 8) % 8, ' ');  // 8 + N is a multiple of 8
  uint8_t len[8];
  const uint64_t n = header.size();
  for (int b = 0; b < 8; ++b) len[b] = static_cast<uint8_t>(n >> (8 * b));

  // Temporary file in the target's directory, so rename() is atomic.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  MN_CHECK(fd >= 0, "write_safetensors: cannot create '", tmp, "': ", std::strerror(errno));
  try {
    write_all(fd, len, 8, tmp);
    write_all(fd, header.data(), header.size(), tmp);
    for (const auto& h : host)
      if (h.nbytes() > 0) write_all(fd, h.raw_data(), h.nbytes(), tmp);
    MN_CHECK(::fsync(fd) == 0, "write_safetensors: fsync of '", tmp, "' failed: ",
             std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    MN_THROW("write_safetensors: closing '", tmp, "' failed: ", std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    MN_THROW("write_safetensors: renaming '", tmp, "' to '", path, "' failed: ", std::strerror(e));
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

// ---- read --------------------------------------------------------------------------------

namespace {
// Opens `path`, checks it is a regular file, reads and parses the JSON header.
// Returns the header; `in`, `n` (header length) and `data_size` describe the rest.
Json read_header(const std::string& path, std::ifstream& in, uint64_t& n, uint64_t& data_size) {
  MN_CHECK(host_is_little_endian(), "read_safetensors: big-endian hosts are not supported");
  struct stat st;
  MN_CHECK(::stat(path.c_str(), &st) == 0, "read_safetensors: cannot open '", path, "': ", std::strerror(errno));
  // A directory opens as a stream on Linux and reads garbage as the header length.
  MN_CHECK(S_ISREG(st.st_mode), "read_safetensors: '", path, "' is not a regular file (a directory?)");
  in.open(path, std::ios::binary | std::ios::ate);
  MN_CHECK(in.good(), "read_safetensors: cannot open '", path, "': ", std::strerror(errno));
  const std::streamoff size = in.tellg();
  in.seekg(0);
  MN_CHECK(size >= 8, "read_safetensors: '", path, "' is ", size,
           " bytes, too short for the 8-byte header length (truncated?)");
  uint8_t len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  MN_CHECK(in.good(), "read_safetensors: '", path, "': reading the header length failed");
  n = 0;
  for (int b = 0; b < 8; ++b) n |= static_cast<uint64_t>(len[b]) << (8 * b);
  const uint64_t avail = static_cast<uint64_t>(size) - 8;
  MN_CHECK(n <= avail, "read_safetensors: '", path, "' declares a ", n,
           "-byte JSON header but only ", avail, " bytes follow (truncated or not safetensors)");
  MN_CHECK(n <= (100u << 20), "read_safetensors: '", path, "' declares a ", n,
           "-byte header (over the 100 MB limit; not a safetensors file?)");
  std::string header(static_cast<size_t>(n), '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  MN_CHECK(in.good(), "read_safetensors: '", path, "': reading the header failed");
  data_size = avail - n;
  Json root;
  try {
    root = Json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    MN_THROW("read_safetensors: '", path, "': bad JSON header: ", e.what());
  }
  MN_CHECK(root.is_object(), "read_safetensors: '", path, "': the header is not a JSON object");
  return root;
}

Metadata parse_metadata(const Json& v, const std::string& path) {
  MN_CHECK(v.is_object(), "read_safetensors: '", path, "': __metadata__ must be an object of strings");
  Metadata md;
  for (auto it = v.begin(); it != v.end(); ++it) {
    MN_CHECK(it->is_string(), "read_safetensors: '", path, "': metadata '", it.key(), "' is not a string");
    md[it.key()] = it->get<std::string>();
  }
  return md;
}
}  // namespace

Metadata read_safetensors_metadata(const std::string& path) {
  std::ifstream in;
  uint64_t n = 0, data_size = 0;
  const Json root = read_header(path, in, n, data_size);
  auto it = root.find("__metadata__");
  return it == root.end() ? Metadata{} : parse_metadata(*it, path);
}

std::map<std::string, Shape> read_safetensors_shapes(const std::string& path) {
  std::ifstream in;
  uint64_t n = 0, data_size = 0;
  const Json root = read_header(path, in, n, data_size);
  std::map<std::string, Shape> out;
  for (auto field = root.begin(); field != root.end(); ++field) {
    if (field.key() == "__metadata__") continue;
    auto sh = field->is_object() ? field->find("shape") : field->end();
    MN_CHECK(field->is_object() && sh != field->end() && sh->is_array(), "read_safetensors: '", path,
             "': tensor '", field.key(), "' has no 'shape' array");
    Shape& s = out[field.key()];
    constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    for (const auto& d : *sh)
      s.push_back(static_cast<int64_t>(std::min(json_uint(d, path, "a dimension of '" + field.key() + "'"), kMax)));
  }
  return out;
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in;
  uint64_t n = 0, data_size = 0;
  const Json root = read_header(path, in, n, data_size);

  SafetensorsFile out;
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto field = root.begin(); field != root.end(); ++field) {
    const std::string& name = field.key();
    const Json& v = *field;
    if (name == "__metadata__") {
      out.metadata = parse_metadata(v, path);
      continue;
    }
    const std::string ctx = "read_safetensors: '" + path + "': tensor '" + name + "'";
    MN_CHECK(v.is_object(), ctx, " is not a JSON object");
    auto dt = v.find("dtype"), sh = v.find("shape"), off = v.find("data_offsets");
    MN_CHECK(dt != v.end() && dt->is_string(), ctx, " has no string 'dtype'");
    MN_CHECK(sh != v.end() && sh->is_array(), ctx, " has no 'shape' array");
    MN_CHECK(off != v.end() && off->is_array() && off->size() == 2, ctx, " has no 'data_offsets' [begin, end]");
    Entry e;
    e.name = name;
    const std::string dtype_text = dt->get<std::string>();
    e.dtype = parse_safetensors_dtype(dtype_text, ctx);
    uint64_t numel = 1;
    bool empty = false;  // a zero dimension: any other sizes describe no bytes
    for (const auto& d : *sh) empty = empty || (d.is_number_integer() && d.get<int64_t>() == 0);
    for (const auto& d : *sh) {
      const uint64_t x = json_uint(d, path, "a dimension of '" + name + "'");
      // Bounded by the data the file holds, so that numel * dtype_size below
      // cannot wrap around (a wrapped size could match empty data_offsets).
      MN_CHECK(x <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
                   (empty || x == 0 || numel <= data_size / dtype_size(e.dtype) / x),
               ctx, " has a shape (dimension ", d.dump(), ") larger than the ", data_size,
               " data bytes of the file can hold");
      numel *= x;
      e.shape.push_back(static_cast<int64_t>(x));
    }
    e.begin = json_uint((*off)[0], path, "data_offsets of '" + name + "'");
    e.end = json_uint((*off)[1], path, "data_offsets of '" + name + "'");
    MN_CHECK(e.begin <= e.end, ctx, " has data_offsets [", e.begin, ", ", e.end,
             "] with begin > end");
    MN_CHECK(e.end - e.begin == numel * dtype_size(e.dtype), ctx, " of shape ",
             shape_str(e.shape), " and dtype ", dtype_text, " needs ", numel * dtype_size(e.dtype),
             " bytes but its data_offsets span ", e.end - e.begin);
    MN_CHECK(e.end <= data_size, ctx, " needs data bytes [", e.begin, ", ", e.end,
             ") but the file holds only ", data_size, " data bytes (truncated?)");
    MN_CHECK(out.tensors.count(name) == 0, ctx, " appears twice");
    out.tensors[name] = Tensor();
    entries.push_back(std::move(e));
  }
  // Read each tensor's bytes.
  std::vector<uint8_t> buf;
  for (const auto& e : entries) {
    buf.resize(static_cast<size_t>(e.end - e.begin));
    in.seekg(static_cast<std::streamoff>(8 + n + e.begin));
    if (!buf.empty()) in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    MN_CHECK(in.good(), "read_safetensors: '", path, "': reading tensor '", e.name, "' failed");
    out.tensors[e.name] = Tensor::from_host(buf.data(), e.shape, e.dtype);
  }
  return out;
}

// ---- checkpoints ------------------------------------------------------------------------

namespace {
// The first NaN or Inf of a float tensor read from a file (contiguous, CPU):
// its flat index, or -1 when every element is finite (or the dtype is not float).
template <typename T>
int64_t first_non_finite_of(const T* p, int64_t n, double* bad) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) {
      *bad = static_cast<double>(p[i]);
      return i;
    }
  return -1;
}
int64_t first_non_finite(const Tensor& t, double* bad) {
  if (t.dtype() == DType::F32) return first_non_finite_of(t.data<float>(), t.numel(), bad);
  if (t.dtype() == DType::F64) return first_non_finite_of(t.data<double>(), t.numel(), bad);
  return -1;
}
}  // namespace

void save_checkpoint(const std::string& path, Module& model, const Optimizer* opt,
                     const Metadata& metadata) {
  NamedTensors all;
  std::set<std::string> names;
  auto add = [&](const std::string& name, const Tensor& t) {
    MN_CHECK(names.insert(name).second, "save_checkpoint: '", path, "': tensor name '", name,
             "' is used twice (a module child named 'optim'?)");
    all.emplace_back(name, t);
  };
  for (const auto& [name, v] : model.named_parameters()) add(name, v.data());
  for (const auto& [name, b] : model.named_buffers())
    if (b->defined()) add(name, *b);
  Metadata md = metadata;
  md["format"] = "metricnet-checkpoint-v1";
  if (opt) {
    for (const auto& [name, t] : opt->state_dict()) add(name, t);
    md["optimizer"] = opt->kind();
  }
  write_safetensors(path, all, md);
}

Metadata load_checkpoint(const std::string& path, Module& model, Optimizer* opt) {
  SafetensorsFile f = read_safetensors(path);
  auto fetch = [&](const std::string& name, const Tensor& dst, const char* what) -> const Tensor& {
    auto it = f.tensors.find(name);
    MN_CHECK(it != f.tensors.end(), "load_checkpoint: '", path, "' has no tensor '", name,
             "' (", what, " of the model)");
    MN_CHECK(it->second.shape() == dst.shape(), "load_checkpoint: '", path, "': tensor '", name,
             "' has shape ", shape_str(it->second.shape()), " but the model's ", what, " has ",
             shape_str(dst.shape()));
    MN_CHECK(it->second.dtype() == dst.dtype(), "load_checkpoint: '", path, "': tensor '", name,
             "' is ", dtype_name(it->second.dtype()), " but the model's ", what, " is ",
             dtype_name(dst.dtype()));
    return it->second;
  };
  // Validate everything before writing anything, so a bad file leaves the model intact.
  auto params = model.named_parameters();
  auto buffers = model.named_buffers();
  for (const auto& [name, v] : params) fetch(name, v.data(), "parameter");
  for (const auto& [name, b] : buffers)
    if (b->defined()) fetch(name, *b, "buffer");
  // Weights that are NaN or Inf would be scored or trained on without a word
  // (a NaN net scored 5 % on Lake's trials: every distance clamped equal).
  // Checked in the file's (sorted) order, so the tensor named is the file's first bad one.
  std::set<std::string> weights;
  for (const auto& [name, v] : params) weights.insert(name);
  for (const auto& [name, b] : buffers)
    if (b->defined()) weights.insert(name);
  for (const auto& [name, t] : f.tensors) {
    if (!weights.count(name)) continue;
    double bad = 0;
    const int64_t i = first_non_finite(t, &bad);
    MN_CHECK(i < 0, "load_checkpoint: '", path, "': tensor '", name, "' holds ",
             std::isnan(bad) ? "NaN" : bad > 0 ? "+Inf" : "-Inf", " (element ", i, " of ", t.numel(),
             "; the first non-finite tensor of the file): its weights are not finite, so the run that wrote "
             "it diverged or the file is damaged; use an earlier checkpoint");
  }
  if (opt) {
    auto it = f.metadata.find("optimizer");
    MN_CHECK(it == f.metadata.end() || it->second == opt->kind(), "load_checkpoint: '", path,
             "' holds ", it->second, " state but the optimizer is ", opt->kind());
  }
  for (auto& [name, v] : params) {
    Tensor dst = v.data();  // a view of the same storage: copying keeps identity and device
    dst.copy_(f.tensors.at(name));
  }
  for (auto& [name, b] : buffers)
    if (b->defined()) b->copy_(f.tensors.at(name));
  if (opt) opt->load_state_dict(f.tensors, path);
  return f.metadata;
}

void put_generator_state(Metadata& md, const std::string& key, const Generator& g) {
  md[key + ".seed"] = std::to_string(g.seed());
  md[key + ".offset"] = std::to_string(g.offset());
}

void get_generator_state(const Metadata& md, const std::string& key, Generator& g, const std::string& file) {
  const std::string where = file.empty() ? "" : "'" + file + "': ";
  auto num = [&](const std::string& k) -> uint64_t {
    auto it = md.find(k);
    MN_CHECK(it != md.end(), "get_generator_state: ", where, "metadata has no '", k, "'");
    const std::string& s = it->second;
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    MN_CHECK(!s.empty() && s.find_first_not_of("0123456789") == std::string::npos && *end == '\0' && errno == 0,
             "get_generator_state: ", where, "metadata '", k, "' = '", s, "' is not an unsigned 64-bit integer");
    return static_cast<uint64_t>(v);
  };
  const uint64_t seed = num(key + ".seed");
  const uint64_t offset = num(key + ".offset");
  g.set_state(seed, offset);
}

}  // namespace mn::nn
