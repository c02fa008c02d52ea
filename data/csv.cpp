// CSV reader and the Iris loader.
#include "data/csv.h"
#include "data/file_io.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <cstring>
#include <sstream>

namespace mn::data {

namespace {
std::vector<std::string> split_line(const std::string& line) {
  std::vector<std::string> f;
  size_t start = 0;
  while (true) {
    size_t c = line.find(',', start);
    std::string field = line.substr(start, c == std::string::npos ? std::string::npos : c - start);
    size_t a = field.find_first_not_of(" \t"), b = field.find_last_not_of(" \t");
    f.push_back(a == std::string::npos ? std::string() : field.substr(a, b - a + 1));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return f;
}
// A feature: a plain decimal number (strtod alone also takes "nan", "inf" and
// hexadecimal) that is finite and representable as float (1e39 would become inf).
bool parse_feature(const std::string& s, float* out) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '+' &&
        c != 'e' && c != 'E')
      return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) return false;
  if (std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max())) return false;
  *out = static_cast<float>(v);
  return true;
}
}  // namespace

CsvTable read_csv(const std::string& path, bool has_header) {
  // Read through read_regular_file: a directory or FIFO is refused, never read.
  const std::vector<uint8_t> bytes = read_regular_file(path, "read_csv");
  return parse_csv(std::string(bytes.begin(), bytes.end()), path, has_header);
}

CsvTable parse_csv(const std::string& text, const std::string& path, bool has_header) {
  std::istringstream f(text);
  CsvTable t;
  std::string line;
  int lineno = 0;
  size_t want = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::vector<std::string> fields = split_line(line);
    if (want == 0) {
      want = fields.size();
      if (has_header) {
        t.header = fields;
        continue;
      }
    }
    MN_DATA_CHECK(fields.size() == want, "read_csv: '", path, "' line ", lineno, ": wrong number of fields (",
             fields.size(), ", expected ", want, ")");
    t.rows.push_back(std::move(fields));
  }
  MN_DATA_CHECK(!t.rows.empty(), "read_csv: '", path, "' holds no data rows");
  return t;
}

TabularDataset load_iris(const std::string& path) { return iris_from_table(read_csv(path, true), path); }

TabularDataset iris_from_table(const CsvTable& t, const std::string& path) {
  MN_DATA_CHECK(t.header.size() >= 2, "load_iris: '", path,
                "': needs a header with at least one feature column and a class column");
  const size_t nf = t.header.size() - 1;
  TabularDataset ds;
  ds.feature_names.assign(t.header.begin(), t.header.end() - 1);
  std::vector<float> x;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    MN_DATA_CHECK(t.rows[r].size() == t.header.size(), "load_iris: '", path, "' data row ", r + 1,
                  ": ", t.rows[r].size(), " fields, the header has ", t.header.size());
    for (size_t j = 0; j < nf; ++j) {
      const std::string& s = t.rows[r][j];
      float v = 0;
      MN_DATA_CHECK(parse_feature(s, &v), "load_iris: '", path, "' data row ", r + 1, ", column '",
                    t.header[j], "': '", s,
                    "' is not a number (a finite decimal within float range is needed): fix or remove the row");
      x.push_back(v);
    }
    const std::string& cls = t.rows[r][nf];
    MN_DATA_CHECK(!cls.empty(), "load_iris: '", path, "' data row ", r + 1, ": the class column '",
                  t.header[nf], "' is empty: every row needs a class name");
    int32_t id = -1;
    for (size_t c = 0; c < ds.class_names.size(); ++c)
      if (ds.class_names[c] == cls) id = static_cast<int32_t>(c);
    if (id < 0) {
      id = static_cast<int32_t>(ds.class_names.size());
      ds.class_names.push_back(cls);
    }
    ds.labels.push_back(id);
  }
  ds.features = Tensor::from_vector(x, {static_cast<int64_t>(t.rows.size()), static_cast<int64_t>(nf)});
  return ds;
}

TabularDataset subset(const TabularDataset& ds, const std::vector<int64_t>& idx) {
  TabularDataset out;
  out.feature_names = ds.feature_names;
  out.class_names = ds.class_names;
  const int64_t F = ds.features.size(1);
  Tensor src = ds.features.contiguous();
  out.features = Tensor::empty({static_cast<int64_t>(idx.size()), F}, DType::F32);
  for (size_t k = 0; k < idx.size(); ++k) {
    MN_DATA_CHECK(idx[k] >= 0 && idx[k] < src.size(0), "subset: row ", idx[k], " out of range");
    std::memcpy(out.features.data<float>() + k * F, src.data<float>() + idx[k] * F, sizeof(float) * F);
    out.labels.push_back(ds.labels[idx[k]]);
  }
  return out;
}

}  // namespace mn::data
