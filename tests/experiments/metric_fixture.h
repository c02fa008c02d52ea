// metric_train and metric_embed run in-process with an argument list (the program's
// name added), as a user runs the binaries: shared by the your-own-images tests.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "experiments/common/harness.h"
#include "experiments/metric/embed.h"
#include "experiments/metric/folder_study.h"

namespace mn_test_exp {

inline int run_args(const std::function<int(int, char**)>& main_fn, std::vector<std::string> args, const char* prog) {
  args.insert(args.begin(), prog);
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  return main_fn(static_cast<int>(args.size()), av.data());
}
inline int metric_train(const std::vector<std::string>& args) {
  return run_args([](int ac, char** av) { return mn::exp::run_study(mn::exp::make_metric_folder_study(), ac, av); },
                  args, "metric_train");
}
inline int metric_embed(const std::vector<std::string>& args) {
  return run_args(mn::exp::run_metric_embed, args, "metric_embed");
}

}  // namespace mn_test_exp
