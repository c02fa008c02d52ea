// lmnn_sdp_export: one non-hierarchical LMNN problem of the study (a data set's
// split for one seed, one miner, k and c), solved by our projected sub-gradient
// solver, written as JSON for an independent interior-point solve
// (bench/references/lmnn_sdp_cvxopt.py): the training points, the pull pairs and
// triplets, c, our M, our objective and iterations, and the validation / test
// points with which both metrics are scored by k-NN.
//
//   lmnn_sdp_export --dataset orl --mining k-BH --k 1 --c 0.1 --seed 1 --out orl.json
#include "experiments/lmnn_mining/sdp_export.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "experiments/common/flags.h"
#include "experiments/common/harness.h"
#include "experiments/common/json.h"
#include "experiments/lmnn_mining/datasets.h"
#include "experiments/lmnn_mining/experiment.h"
#include "experiments/lmnn_mining/miners.h"
#include "experiments/lmnn_mining/solver.h"
#include "runtime/error.h"
#include "runtime/rng.h"

namespace {

using mn::exp::Flags;
using mn::exp::Json;
using mn::lmnn::Mat;

void declare(Flags& f) {
  f.add_string("dataset", "iris", "data set", {"iris", "orl", "mnist"});
  f.add_string("mining", "k-BH", "miner: k-BA, k-BH, k-BSH, k-HPEN, k-EPEN, k-EPHN or k-NS");
  f.add_int("k", 3, "neighbour count of the miner (and of the k-NN scores)", 1, 1000);
  f.add_double("c", 1.0, "hinge weight", 0, 1e9);
  f.add_int("seed", 1, "the study's seed: the split and the miner's stream, as in its cells", 0,
            1000000000);
  f.add_int("max-iter", 1000, "our solver: most projected sub-gradient steps", 1, 100000000);
  f.add_double("tol", 1e-5, "our solver: relative objective change that stops it", 0, 1);
  f.add_string("out", "lmnn_problem.json", "the JSON file written");
  f.add_string("data-dir", "", "folder holding iris/, orl_faces/, mnist/ (default: $MN_DATA_DIR, "
               "./datasets, ../shared/datasets)");
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

int run(const Flags& f) {
  const std::string dataset = f.str("dataset"), mining = f.str("mining"), out = f.str("out");
  const int64_t k = f.i64("k"), seed = f.i64("seed");
  const double c = f.f64("c");
  mn::lmnn::StudyData data(f.str("data-dir"));
  const mn::lmnn::StudySplit sp = data.split(dataset, static_cast<uint64_t>(seed));
  const mn::lmnn::MinerParams mp{mn::lmnn::parse_mining(mining), k, 1.4};
  // The study's stream for (seed, k): the same terms as its cell.
  mn::Generator g = mn::lmnn::fit_generator(static_cast<uint64_t>(seed), k);
  const mn::lmnn::Mined terms = mn::lmnn::mine(sp.train, sp.ytrain, mp, g);
  mn::lmnn::SolverOptions so;
  so.c = c;
  so.max_iter = f.i64("max-iter");
  so.tol = f.f64("tol");
  const mn::lmnn::SolveResult r = mn::lmnn::solve_lmnn(sp.train, terms, so);
  Json js;
  js["dataset"] = dataset;
  js["mining"] = mining;
  js["k"] = k;
  js["c"] = c;
  js["seed"] = seed;
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
  js["test_accuracy_ours"] = mn::lmnn::knn_accuracy(sp.train, sp.ytrain, sp.test, sp.ytest, r.L, k);
  js["test_accuracy_euclidean"] = mn::lmnn::knn_accuracy(sp.train, sp.ytrain, sp.test, sp.ytest, I, k);
  std::ofstream file(out);
  MN_CHECK(file.good(), "--out ", out, ": cannot write the file");
  file << js.dump() << "\n";
  MN_CHECK(file.good(), "--out ", out, ": writing failed (disk full?)");
  std::printf("%s %s k=%lld c=%g: %zu triplets, objective %g after %lld steps -> %s\n",
              dataset.c_str(), mining.c_str(), static_cast<long long>(k), c, terms.triplets.size(),
              r.objective, static_cast<long long>(r.iterations), out.c_str());
  return mn::exp::kExitOk;
}

}  // namespace

namespace mn::lmnn {

int run_sdp_export(int argc, char** argv) {
  Flags f("lmnn_sdp_export", "One LMNN problem of the study, solved by our solver, as JSON for "
          "bench/references/lmnn_sdp_cvxopt.py");
  try {
    declare(f);
    if (!f.parse(argc, argv)) return mn::exp::kExitOk;  // --help
    f.validate_ranges();
    mn::lmnn::parse_mining(f.str("mining"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lmnn_sdp_export: %s\n", mn::user_message(e).c_str());
    return mn::exp::kExitUsage;
  }
  try {
    return run(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lmnn_sdp_export: error: %s\n", mn::user_message(e).c_str());
    return mn::exp::kExitFailed;
  }
}

}  // namespace mn::lmnn
