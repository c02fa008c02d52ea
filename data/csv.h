// CSV reading (comma-separated, optional header, no quoting) and Fisher's Iris:
// four float features and the species as a class label, with stratified
// train/validation/test splits from data/dataset.h.
#pragma once
#include <string>
#include <vector>

#include "data/dataset.h"

namespace mn::data {

struct CsvTable {
  std::vector<std::string> header;              // empty when has_header is false
  std::vector<std::vector<std::string>> rows;   // every row has header.size() fields
};

// Throws mn::Error naming the file and line for a row with the wrong number of
// fields (the first row's count, or the header's, is the reference).
CsvTable read_csv(const std::string& path, bool has_header = true);

// The same from text in memory (for the fuzz targets); `path` names it in errors.
CsvTable parse_csv(const std::string& text, const std::string& path, bool has_header = true);

struct TabularDataset {
  Tensor features;                      // (N, F) float32, CPU
  std::vector<int32_t> labels;          // (N)
  std::vector<std::string> feature_names;
  std::vector<std::string> class_names; // in order of first appearance
};

// Iris: the last column is the class name (never empty); the others must be
// finite decimal numbers within float range ("nan", "inf", "1e39" and hex are
// refused, naming the file, row and column).
TabularDataset load_iris(const std::string& path);
// The same from a parsed table (header + rows); `path` names it in errors.
TabularDataset iris_from_table(const CsvTable& t, const std::string& path);

// Rows `idx` of a tabular dataset.
TabularDataset subset(const TabularDataset& ds, const std::vector<int64_t>& idx);

}  // namespace mn::data
