// safetensors reader/writer (with a small JSON parser for the header) and the
// checkpoint save/load of module + optimizer state (nn/checkpoint.h).
#include "nn/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

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

void json_escape(std::ostringstream& os, const std::string& s) {
  os << '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': os << "\\\""; break;
      case '\\': os << "\\\\"; break;
      case '\n': os << "\\n"; break;
      case '\r': os << "\\r"; break;
      case '\t': os << "\\t"; break;
      case '\b': os << "\\b"; break;
      case '\f': os << "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          os << buf;
        } else {
          os << static_cast<char>(c);
        }
    }
  }
  os << '"';
}

// Just enough JSON for a safetensors header: objects, arrays, strings,
// integers (other numbers, true/false/null are parsed and kept as text).
struct JsonValue {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  std::string text;  // String: the decoded string; Number/Bool: the literal
  std::vector<JsonValue> items;                           // Array
  std::vector<std::pair<std::string, JsonValue>> fields;  // Object, in file order
};

class JsonParser {
 public:
  JsonParser(const std::string& s, const std::string& file) : s_(s), file_(file) {}

  JsonValue parse_document() {
    JsonValue v = value(0);
    ws();
    if (i_ != s_.size()) fail("trailing characters after the JSON header");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    MN_THROW("read_safetensors: '", file_, "': bad JSON header at byte ", i_, ": ", what);
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  char peek() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  JsonValue value(int depth) {
    if (depth > 64) fail("nesting too deep");
    const char c = peek();
    JsonValue v;
    if (c == '{') {
      v.kind = JsonValue::Object;
      ++i_;
      if (peek() == '}') {
        ++i_;
        return v;
      }
      for (;;) {
        if (peek() != '"') fail("expected a string key");
        std::string k = string();
        expect(':');
        v.fields.emplace_back(std::move(k), value(depth + 1));
        const char d = peek();
        ++i_;
        if (d == '}') break;
        if (d != ',') fail("expected ',' or '}'");
      }
    } else if (c == '[') {
      v.kind = JsonValue::Array;
      ++i_;
      if (peek() == ']') {
        ++i_;
        return v;
      }
      for (;;) {
        v.items.push_back(value(depth + 1));
        const char d = peek();
        ++i_;
        if (d == ']') break;
        if (d != ',') fail("expected ',' or ']'");
      }
    } else if (c == '"') {
      v.kind = JsonValue::String;
      v.text = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = JsonValue::Number;
      const size_t b = i_;
      if (s_[i_] == '-') ++i_;
      while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' ||
                                s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-'))
        ++i_;
      v.text = s_.substr(b, i_ - b);
    } else if (s_.compare(i_, 4, "true") == 0 || s_.compare(i_, 4, "null") == 0) {
      v.kind = s_[i_] == 't' ? JsonValue::Bool : JsonValue::Null;
      v.text = s_.substr(i_, 4);
      i_ += 4;
    } else if (s_.compare(i_, 5, "false") == 0) {
      v.kind = JsonValue::Bool;
      v.text = "false";
      i_ += 5;
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
    return v;
  }
  static void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail("short \\u escape");
    uint32_t cp = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      cp <<= 4;
      if (h >= '0' && h <= '9') cp |= h - '0';
      else if (h >= 'a' && h <= 'f') cp |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') cp |= h - 'A' + 10;
      else fail("bad \\u escape");
    }
    return cp;
  }
  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && i_ + 6 <= s_.size() && s_[i_] == '\\' &&
              s_[i_ + 1] == 'u') {
            i_ += 2;
            const uint32_t lo = hex4();
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default: fail(std::string("bad escape '\\") + e + "'");
      }
    }
    return out;
  }

  const std::string& s_;
  const std::string& file_;
  size_t i_ = 0;
};

uint64_t json_uint(const JsonValue& v, const std::string& file, const std::string& what) {
  MN_CHECK(v.kind == JsonValue::Number && !v.text.empty() && v.text[0] != '-' &&
               v.text.find_first_not_of("0123456789") == std::string::npos && v.text.size() <= 19,
           "read_safetensors: '", file, "': ", what, " must be a non-negative integer, got '",
           v.text, "'");
  return std::stoull(v.text);
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
  std::ostringstream js;
  js << '{';
  bool first = true;
  if (!metadata.empty()) {
    js << "\"__metadata__\":{";
    bool f2 = true;
    for (const auto& [k, v] : metadata) {
      if (!f2) js << ',';
      f2 = false;
      json_escape(js, k);
      js << ':';
      json_escape(js, v);
    }
    js << '}';
    first = false;
  }
  uint64_t offset = 0;
  std::vector<Tensor> host;  // contiguous CPU copies, in file order
  host.reserve(sorted.size());
  for (const auto& [name, t] : sorted) {
    Tensor h = t.contiguous().cpu();  // explicit, counted device-to-host copy when on a GPU
    if (!first) js << ',';
    first = false;
    json_escape(js, name);
    js << ":{\"dtype\":\"" << safetensors_dtype(h.dtype()) << "\",\"shape\":[";
    for (int64_t d = 0; d < h.dim(); ++d) js << (d ? "," : "") << h.size(d);
    js << "],\"data_offsets\":[" << offset << ',' << offset + h.nbytes() << "]}";
    offset += h.nbytes();
    host.push_back(std::move(h));
  }
  js << '}';
  std::string header = js.str();
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

SafetensorsFile read_safetensors(const std::string& path) {
  MN_CHECK(host_is_little_endian(), "read_safetensors: big-endian hosts are not supported");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  MN_CHECK(in.good(), "read_safetensors: cannot open '", path, "': ", std::strerror(errno));
  const std::streamoff size = in.tellg();
  in.seekg(0);
  MN_CHECK(size >= 8, "read_safetensors: '", path, "' is ", size,
           " bytes, too short for the 8-byte header length (truncated?)");
  uint8_t len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int b = 0; b < 8; ++b) n |= static_cast<uint64_t>(len[b]) << (8 * b);
  const uint64_t avail = static_cast<uint64_t>(size) - 8;
  MN_CHECK(n <= avail, "read_safetensors: '", path, "' declares a ", n,
           "-byte JSON header but only ", avail, " bytes follow (truncated or not safetensors)");
  MN_CHECK(n <= (100u << 20), "read_safetensors: '", path, "' declares a ", n,
           "-byte header (over the 100 MB limit; not a safetensors file?)");
  std::string header(static_cast<size_t>(n), '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  MN_CHECK(in.good(), "read_safetensors: '", path, "': reading the header failed");
  const uint64_t data_size = avail - n;

  JsonParser parser(header, path);
  const JsonValue root = parser.parse_document();
  MN_CHECK(root.kind == JsonValue::Object, "read_safetensors: '", path,
           "': the header is not a JSON object");

  SafetensorsFile out;
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (const auto& [name, v] : root.fields) {
    if (name == "__metadata__") {
      MN_CHECK(v.kind == JsonValue::Object, "read_safetensors: '", path,
               "': __metadata__ must be an object of strings");
      for (const auto& [k, s] : v.fields) {
        MN_CHECK(s.kind == JsonValue::String, "read_safetensors: '", path, "': metadata '", k,
                 "' is not a string");
        out.metadata[k] = s.text;
      }
      continue;
    }
    const std::string ctx = "read_safetensors: '" + path + "': tensor '" + name + "'";
    MN_CHECK(v.kind == JsonValue::Object, ctx, " is not a JSON object");
    const JsonValue *dt = nullptr, *sh = nullptr, *off = nullptr;
    for (const auto& [k, f] : v.fields) {
      if (k == "dtype") dt = &f;
      else if (k == "shape") sh = &f;
      else if (k == "data_offsets") off = &f;
    }
    MN_CHECK(dt && dt->kind == JsonValue::String, ctx, " has no string 'dtype'");
    MN_CHECK(sh && sh->kind == JsonValue::Array, ctx, " has no 'shape' array");
    MN_CHECK(off && off->kind == JsonValue::Array && off->items.size() == 2, ctx,
             " has no 'data_offsets' [begin, end]");
    Entry e;
    e.name = name;
    e.dtype = parse_safetensors_dtype(dt->text, ctx);
    uint64_t numel = 1;
    bool empty = false;  // a zero dimension: any other sizes describe no bytes
    for (const auto& d : sh->items)
      empty = empty || (d.kind == JsonValue::Number && d.text.find_first_not_of('0') == std::string::npos);
    for (const auto& d : sh->items) {
      const uint64_t x = json_uint(d, path, "a dimension of '" + name + "'");
      // Bounded by the data the file holds, so that numel * dtype_size below
      // cannot wrap around (a wrapped size could match empty data_offsets).
      MN_CHECK(x <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
                   (empty || x == 0 || numel <= data_size / dtype_size(e.dtype) / x),
               ctx, " has a shape (dimension ", d.text, ") larger than the ", data_size,
               " data bytes of the file can hold");
      numel *= x;
      e.shape.push_back(static_cast<int64_t>(x));
    }
    e.begin = json_uint(off->items[0], path, "data_offsets of '" + name + "'");
    e.end = json_uint(off->items[1], path, "data_offsets of '" + name + "'");
    MN_CHECK(e.begin <= e.end, ctx, " has data_offsets [", e.begin, ", ", e.end,
             "] with begin > end");
    MN_CHECK(e.end - e.begin == numel * dtype_size(e.dtype), ctx, " of shape ",
             shape_str(e.shape), " and dtype ", dt->text, " needs ", numel * dtype_size(e.dtype),
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

void get_generator_state(const Metadata& md, const std::string& key, Generator& g) {
  auto num = [&](const std::string& k) -> uint64_t {
    auto it = md.find(k);
    MN_CHECK(it != md.end(), "get_generator_state: metadata has no '", k, "'");
    const std::string& s = it->second;
    MN_CHECK(!s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos,
             "get_generator_state: metadata '", k, "' = '", s, "' is not an unsigned integer");
    return std::stoull(s);
  };
  const uint64_t seed = num(key + ".seed");
  const uint64_t offset = num(key + ".offset");
  g.set_state(seed, offset);
}

}  // namespace mn::nn
