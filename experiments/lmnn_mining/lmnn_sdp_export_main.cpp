// lmnn_sdp_export: one non-hierarchical LMNN problem of the study (a data set's
// split for one seed, one miner, k and c), solved by our projected sub-gradient
// solver, written as JSON for an independent interior-point solve
// (bench/references/lmnn_sdp_cvxopt.py): the training points, the pull pairs and
// triplets, c, our M, our objective and iterations, and the validation / test
// points with which both metrics are scored by k-NN.
//
//   lmnn_sdp_export --dataset orl --mining k-BH --k 1 --c 0.1 --seed 1 --out orl.json
#include <fstream>
#include <iostream>
#include <string>

#include "experiments/common/json.h"
#include "experiments/lmnn_mining/datasets.h"
#include "experiments/lmnn_mining/experiment.h"
#include "experiments/lmnn_mining/miners.h"
#include "experiments/lmnn_mining/solver.h"
#include "runtime/error.h"
#include "runtime/rng.h"

namespace {

using mn::exp::Json;
using mn::lmnn::Mat;

struct Args {
  std::string dataset = "iris", mining = "k-BH", out, data_dir;
  int64_t k = 3, seed = 1, max_iter = 1000;
  double c = 1.0, tol = 1e-5;
  bool help = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--help") {
      std::cout << "usage: lmnn_sdp_export --dataset iris|orl|mnist --mining NAME --k K --c C "
                   "[--seed S] [--max-iter N] [--tol X] [--data-dir DIR] --out FILE.json\n";
      a.help = true;
      return a;
    }
    MN_CHECK(i + 1 < argc, "lmnn_sdp_export: ", key, " needs a value");
    const std::string v = argv[++i];
    try {
      if (key == "--dataset") a.dataset = v;
      else if (key == "--mining") a.mining = v;
      else if (key == "--out") a.out = v;
      else if (key == "--data-dir") a.data_dir = v;
      else if (key == "--k") a.k = std::stoll(v);
      else if (key == "--seed") a.seed = std::stoll(v);
      else if (key == "--max-iter") a.max_iter = std::stoll(v);
      else if (key == "--c") a.c = std::stod(v);
      else if (key == "--tol") a.tol = std::stod(v);
      else MN_THROW("lmnn_sdp_export: unknown flag ", key, " (see --help)");
    } catch (const std::logic_error&) {
      MN_THROW("lmnn_sdp_export: ", key, " wants a number, got '", v, "'");
    }
  }
  MN_CHECK(!a.out.empty(), "lmnn_sdp_export: --out FILE is required");
  MN_CHECK(a.k >= 1 && a.c >= 0 && a.max_iter >= 1, "lmnn_sdp_export: bad --k, --c or --max-iter");
  return a;
}

Json matrix(const Mat& m) {
  Json rows = Json::array();
  for (int64_t i = 0; i < m.rows; ++i) {
    Json r = Json::array();
    for (int64_t j = 0; j < m.cols; ++j) r.push_back(m(i, j));
    rows.push_back(r);
  }
  return rows;
}

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.help) return 0;
  mn::lmnn::StudyData data(a.data_dir);
  const mn::lmnn::StudySplit sp = data.split(a.dataset, static_cast<uint64_t>(a.seed));
  const mn::lmnn::MinerParams mp{mn::lmnn::parse_mining(a.mining), a.k, 1.4};
  // The study's stream for (seed, k) (experiment.cpp train_metric): the same terms as its cell.
  mn::Generator g(static_cast<uint64_t>(a.seed) * 7919ULL + static_cast<uint64_t>(a.k) + 17ULL);
  const mn::lmnn::Mined terms = mn::lmnn::mine(sp.train, sp.ytrain, mp, g);
  mn::lmnn::SolverOptions so;
  so.c = a.c;
  so.max_iter = a.max_iter;
  so.tol = a.tol;
  const mn::lmnn::SolveResult r = mn::lmnn::solve_lmnn(sp.train, terms, so);
  Json js;
  js["dataset"] = a.dataset;
  js["mining"] = a.mining;
  js["k"] = a.k;
  js["c"] = a.c;
  js["seed"] = a.seed;
  js["X"] = matrix(sp.train);
  js["y"] = sp.ytrain;
  js["Xval"] = matrix(sp.val);
  js["yval"] = sp.yval;
  js["Xtest"] = matrix(sp.test);
  js["ytest"] = sp.ytest;
  js["pull"] = terms.pull;
  js["triplets"] = terms.triplets;
  js["M_ours"] = matrix(r.M);
  js["objective_ours"] = r.objective;
  js["iterations_ours"] = r.iterations;
  js["converged_ours"] = r.converged;
  const Mat I = Mat::identity(sp.train.cols);
  js["test_accuracy_ours"] = mn::lmnn::knn_accuracy(sp.train, sp.ytrain, sp.test, sp.ytest, r.L, a.k);
  js["test_accuracy_euclidean"] = mn::lmnn::knn_accuracy(sp.train, sp.ytrain, sp.test, sp.ytest, I, a.k);
  std::ofstream f(a.out);
  MN_CHECK(f.good(), "lmnn_sdp_export: cannot write ", a.out);
  f << js.dump() << "\n";
  MN_CHECK(f.good(), "lmnn_sdp_export: writing ", a.out, " failed");
  std::cout << a.dataset << " " << a.mining << " k=" << a.k << " c=" << a.c << ": "
            << terms.triplets.size() << " triplets, objective " << r.objective << " after "
            << r.iterations << " steps -> " << a.out << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  return 1;
}
