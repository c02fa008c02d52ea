// CSV reader and the Iris loader.
#include "data/csv.h"

#include <cstdlib>
#include <cstring>
#include <fstream>

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
}  // namespace

CsvTable read_csv(const std::string& path, bool has_header) {
  std::ifstream f(path);
  MN_CHECK(f.good(), "read_csv: cannot open '", path, "'");
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
    MN_CHECK(fields.size() == want, "read_csv: '", path, "' line ", lineno, ": wrong number of fields (",
             fields.size(), ", expected ", want, ")");
    t.rows.push_back(std::move(fields));
  }
  MN_CHECK(!t.rows.empty(), "read_csv: '", path, "' holds no data rows");
  return t;
}

TabularDataset load_iris(const std::string& path) {
  CsvTable t = read_csv(path, true);
  const size_t nf = t.header.size() - 1;
  MN_CHECK(nf >= 1, "load_iris: '", path, "': needs at least one feature and a class column");
  TabularDataset ds;
  ds.feature_names.assign(t.header.begin(), t.header.end() - 1);
  std::vector<float> x;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    for (size_t j = 0; j < nf; ++j) {
      const std::string& s = t.rows[r][j];
      char* end = nullptr;
      double v = std::strtod(s.c_str(), &end);
      MN_CHECK(!s.empty() && end && *end == '\0', "load_iris: '", path, "' data row ", r + 1,
               ", column '", t.header[j], "': not a number: '", s, "'");
      x.push_back(static_cast<float>(v));
    }
    const std::string& cls = t.rows[r][nf];
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
    MN_CHECK(idx[k] >= 0 && idx[k] < src.size(0), "subset: row ", idx[k], " out of range");
    std::memcpy(out.features.data<float>() + k * F, src.data<float>() + idx[k] * F, sizeof(float) * F);
    out.labels.push_back(ds.labels[idx[k]]);
  }
  return out;
}

}  // namespace mn::data
