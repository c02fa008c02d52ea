// libFuzzer target: the CSV reader and the Iris loader on the parsed table.
#include <string>

#include "data/csv.h"
#include "fuzz/fuzz_common.h"

MN_FUZZ_TARGET({
  const std::string text(reinterpret_cast<const char*>(data), size);
  mn::data::CsvTable t = mn::data::parse_csv(text, "fuzz.csv", true);
  mn::data::TabularDataset ds = mn::data::iris_from_table(t, "fuzz.csv");
  if (static_cast<size_t>(ds.features.size(0)) != ds.labels.size()) __builtin_trap();
})
