// pair_selection: the informed-pair-selection study (Martin et al., SGAI 2018)
// on MNIST. Six methods (BASE, BASE*, DynE, DynE*, DynEE, DynEE*) x 10 folds of
// 600 training images, a siamese MLP trained 100 epochs, test accuracy by the
// prototype vote every 5 epochs, paired t-tests against BASE. `--help` lists
// every flag; the defaults are the study's protocol
// (/work/shared/docs/study-protocols.md, "Informed pair selection").
//
// Outputs in --out-dir: runs.jsonl (one line per method x fold x evaluation),
// results.md (Table 2's MNIST rows beside ours), results.json, figure2.png,
// config.txt. Runs are spread over the CPU thread pool, one (method, fold) per
// thread; each run is single-threaded (batch 16 is too small to split).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>

#include "data/idx.h"
#include "experiments/common/flags.h"
#include "experiments/common/metrics.h"
#include "experiments/common/progress.h"
#include "experiments/pair_selection/report.h"
#include "runtime/error.h"
#include "runtime/parallel.h"

namespace fs = std::filesystem;
using namespace mn;
using namespace mn::pairsel;

namespace {

void declare(exp::Flags& f) {
  f.add_string("method", "all", "which methods to run",
               {"all", "base", "base-ordered", "dyne", "dyne-ordered", "dynee", "dynee-ordered"});
  f.add_int("folds", 10, "number of folds (seeded stratified subsamples), each tested on the full test set");
  f.add_int("budget", 600, "training images per fold (1 % of MNIST's 60,000)");
  f.add_int("epochs", 100, "training epochs");
  f.add_int("cycle", 5, "epochs per pair-selection cycle (DynE, DynEE, and the re-ordering of DynE*, DynEE*)");
  f.add_int("eval-every", 5, "test accuracy every this many epochs");
  f.add_int("batch", 16, "pairs per SGD step");
  f.add_double("lr", 1e-3, "SGD learning rate");
  f.add_double("momentum", 0.8, "SGD momentum (Keras form: v = mu v - lr g)");
  f.add_double("dropout", 0.2, "dropout after each hidden layer but the last");
  f.add_double("margin", 1.0, "contrastive margin M, also the vote's genuine threshold D < M");
  f.add_int("width", 300, "units per dense layer");
  f.add_int("layers", 3, "dense layers (ReLU after each)");
  f.add_int("exploit-div", 6, "DynEE replaces the |P| / this highest-loss pairs (MNIST: |P|/6)");
  f.add_int("knn", 5, "neighbourhood size k of the complexity measure (Eq. 6), self included");
  f.add_int("seed", 1, "base seed: folds, weights, pairs and dropout derive from it");
  f.add_double("alpha", 0.05, "significance level of the one-tailed paired t-test");
  f.add_int("threads", 0, "runs in parallel (0: the thread pool's size, MN_NUM_THREADS or all cores)");
  f.add_string("data-dir", "", "MNIST IDX folder (default: $MN_DATA_DIR, ./datasets or ../shared/datasets, subfolder mnist)");
  f.add_string("out-dir", "runs/pair_selection", "output folder");
  f.add_string("config", "", "key = value file with the same keys as the flags");
  f.add_string("summarise", "", "no training: rewrite results.md, results.json and figure2.png in "
               "--out-dir from this runs.jsonl (an interrupted study: its complete folds)");
}

Examples to_examples(const data::ImageDataset& ds, const std::vector<int64_t>& idx) {
  Examples ex;
  ex.dim = ds.height() * ds.width();
  ex.classes = static_cast<int32_t>(ds.num_classes());
  const uint8_t* px = ds.images.data<uint8_t>();
  ex.x.resize(idx.size() * ex.dim);
  for (size_t i = 0; i < idx.size(); ++i) {
    for (int64_t k = 0; k < ex.dim; ++k)
      ex.x[i * ex.dim + k] = px[idx[i] * ex.dim + k] / 255.0f;  // [0, 1]
    ex.y.push_back(ds.labels[idx[i]]);
  }
  return ex;
}

std::string mnist_dir(const std::string& flag) {
  if (!flag.empty()) return fs::is_directory(fs::path(flag) / "mnist") ? (fs::path(flag) / "mnist").string() : flag;
  const std::string d = data::find_dataset_dir("mnist");
  MN_CHECK(!d.empty(), "pair_selection: --data-dir",
           "MNIST not found in $MN_DATA_DIR, $DATA_DIR, ./datasets or ../shared/datasets "
           "(subfolder mnist); pass --data-dir");
  return d;
}

void write_outputs(const exp::Flags& f, const std::vector<RunResult>& runs,
                   const std::string& header) {
  const std::string out = f.str("out-dir");
  const auto curves = summarise(runs);
  exp::write_file_atomic(out + "/results.md", results_markdown(curves, f.f64("alpha"), header));
  exp::write_file_atomic(out + "/results.json", results_json(curves, f.f64("alpha"), f.to_json()));
  const bool plotted = plot_figure(out + "/figure2.png", curves);
  std::printf("pair_selection: %s/results.md%s\n", out.c_str(),
              plotted ? ", figure2.png" : " (gnuplot missing: figure2.png.gp left)");
}

int summarise_only(const exp::Flags& f) {
  int dropped = 0;
  const auto runs = read_runs_jsonl(f.str("summarise"), &dropped);
  MN_CHECK(!runs.empty(), "pair_selection: --summarise", f.str("summarise"),
           " holds no complete fold");
  std::set<int> folds;
  for (const auto& r : runs) folds.insert(r.fold);
  fs::create_directories(f.str("out-dir"));
  std::ostringstream header;
  header << "# Informed pair selection on MNIST: results\n\nSummarised from " << f.str("summarise")
         << ": " << runs.size() << " runs over " << folds.size() << " complete folds";
  if (dropped) header << " (" << dropped << " incomplete folds left out)";
  header << ".\n";
  write_outputs(f, runs, header.str());
  return 0;
}

int run(const exp::Flags& f) {
  if (!f.str("summarise").empty()) return summarise_only(f);
  StudyConfig cfg;
  cfg.epochs = static_cast<int>(f.i64("epochs"));
  cfg.cycle = static_cast<int>(f.i64("cycle"));
  cfg.eval_every = static_cast<int>(f.i64("eval-every"));
  cfg.exploit_div = f.i64("exploit-div");
  cfg.knn = static_cast<int>(f.i64("knn"));
  cfg.seed = static_cast<uint64_t>(f.i64("seed"));
  cfg.mlp.batch = f.i64("batch");
  cfg.mlp.lr = f.f64("lr");
  cfg.mlp.momentum = f.f64("momentum");
  cfg.mlp.dropout = f.f64("dropout");
  cfg.mlp.margin = f.f64("margin");
  cfg.mlp.hidden.assign(static_cast<size_t>(f.i64("layers")), f.i64("width"));
  const int folds = static_cast<int>(f.i64("folds"));
  MN_CHECK(folds >= 1 && cfg.exploit_div >= 1 && f.i64("layers") >= 1, "pair_selection",
           "--folds ", folds, ", --exploit-div ", cfg.exploit_div, ", --layers ", f.i64("layers"),
           " must be >= 1");
  std::vector<Method> methods;
  if (f.str("method") == "all")
    for (int m = 0; m < kNumMethods; ++m) methods.push_back(static_cast<Method>(m));
  else
    methods.push_back(method_from_flag(f.str("method")));

  const std::string dir = mnist_dir(f.str("data-dir"));
  const auto mnist = data::load_mnist_family(dir);
  std::vector<int64_t> all_test(static_cast<size_t>(mnist.test.size()));
  for (size_t i = 0; i < all_test.size(); ++i) all_test[i] = static_cast<int64_t>(i);
  const Examples test = to_examples(mnist.test, all_test);
  cfg.mlp.input = test.dim;
  std::vector<Examples> fold_train;
  for (int k = 0; k < folds; ++k) {
    Generator g(fold_seed(cfg.seed, k, 0), 0);
    fold_train.push_back(to_examples(mnist.train, stratified_sample(mnist.train.labels, f.i64("budget"), g)));
  }

  const std::string out = f.str("out-dir");
  fs::create_directories(out);
  exp::write_file_atomic(out + "/config.txt", f.to_config());
  fs::remove(out + "/runs.jsonl");  // a fresh study, not appended to an old one
  exp::MetricsLog log(out + "/runs.jsonl");

  struct Job {
    Method m;
    int fold;
  };
  std::vector<Job> jobs;
  for (int k = 0; k < folds; ++k)
    for (Method m : methods) jobs.push_back({m, k});
  std::vector<RunResult> results(jobs.size());
  std::atomic<size_t> next{0};
  std::mutex mu;
  size_t done = 0;
  const int threads = f.i64("threads") > 0 ? static_cast<int>(f.i64("threads")) : num_threads();
  const auto t0 = std::chrono::steady_clock::now();
  std::printf("pair_selection: %zu runs (%zu methods x %d folds of %lld images), %d epochs, %d "
              "in parallel; MNIST from %s\n",
              jobs.size(), methods.size(), folds, static_cast<long long>(f.i64("budget")),
              cfg.epochs, threads, dir.c_str());
  std::fflush(stdout);
  // One worker per thread pulls whole runs from a shared counter (runs differ
  // in cost, so a static split would leave a thread idle at the end).
  parallel_for(0, threads, 1, [&](int64_t, int64_t) {
    for (size_t j; (j = next.fetch_add(1)) < jobs.size();) {
      RunResult r = run_fold(jobs[j].m, jobs[j].fold, cfg, fold_train[jobs[j].fold], test);
      std::lock_guard<std::mutex> lock(mu);
      for (const EvalPoint& p : r.points)
        log.write(exp::JsonLine()
                      .str("method", method_label(r.method))
                      .integer("fold", r.fold)
                      .integer("epoch", p.epoch)
                      .num("accuracy", p.vote.accuracy)
                      .num("nearest_accuracy", p.vote.nearest_accuracy)
                      .num("abstain_share", p.vote.abstain_share)
                      .num("train_loss", p.train_loss)
                      .integer("genuine_pairs", p.genuine_pairs)
                      .num("seconds", r.seconds));
      ++done;
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("[%zu/%zu] %-6s fold %d: %.2f %% at epoch %d (%.1f s); elapsed %s, ETA %s\n", done,
                  jobs.size(), method_label(r.method), r.fold,
                  r.points.empty() ? 0.0 : 100.0 * r.points.back().vote.accuracy,
                  r.points.empty() ? 0 : r.points.back().epoch, r.seconds,
                  exp::format_duration(el).c_str(),
                  exp::format_duration(el / done * (jobs.size() - done)).c_str());
      std::fflush(stdout);
      results[j] = std::move(r);
    }
  });
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::ostringstream header;
  header << "# Informed pair selection on MNIST: results\n\nWall time " << exp::format_duration(total)
         << " (" << static_cast<long long>(total) << " s) for " << jobs.size() << " runs on "
         << threads << " threads.\n";
  write_outputs(f, results, header.str());
  std::printf("pair_selection: done in %s\n", exp::format_duration(total).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  exp::Flags f("pair_selection",
               "The informed-pair-selection study (Martin et al. 2018) on MNIST: BASE, DynE, DynEE "
               "and their self-paced (ordered) variants.");
  try {
    declare(f);
    if (!f.parse(argc, argv)) return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pair_selection: %s\n", e.what());
    return 2;
  }
  try {
    return run(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pair_selection: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "pair_selection: unknown error\n");
    return 1;
  }
}
