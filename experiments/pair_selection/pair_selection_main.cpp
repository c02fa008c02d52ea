// pair_selection: the informed-pair-selection study (Martin et al., SGAI 2018)
// on MNIST, on the study harness (experiments/common/harness.h) as a
// custom-shaped study: six methods (BASE, BASE*, DynE, DynE*, DynEE, DynEE*) x
// 10 folds of 600 training images, a siamese MLP trained 100 epochs, test
// accuracy by the prototype vote every 5 epochs, paired t-tests against BASE.
// `--help` lists every flag; the defaults are the study's protocol
// (/work/shared/docs/study-protocols.md, "Informed pair selection").
//
// The harness owns flags, config, --seed, --out-dir, metrics.jsonl (one line
// per method x fold x evaluation), summary.json, report.md and main(). The
// study adds results.md (Table 2's MNIST rows beside ours), results.json and
// figure2.png. Runs are spread over the CPU thread pool, one (method, fold) per
// thread; each run is single-threaded (batch 16 is too small to split).
//
// CPU only: the fused batch-16 MLP (siamese_mlp.h) has no CUDA path, so a CUDA
// device is refused rather than silently replaced. A study stopped by
// --time-limit, --stop-after or a signal keeps its finished runs in
// metrics.jsonl: --resume reruns only the others (a run is deterministic given
// its method, fold and seed), and --summarise turns complete folds into results.
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "data/idx.h"
#include "experiments/common/harness.h"
#include "experiments/common/provenance.h"
#include "experiments/pair_selection/export.h"
#include "experiments/pair_selection/options.h"
#include "experiments/pair_selection/report.h"
#include "runtime/error.h"
#include "runtime/parallel.h"

namespace fs = std::filesystem;
using namespace mn;
using namespace mn::pairsel;

namespace {

// Pixels as floats divided by `divisor` (255: [0, 1]; 1: the IDX bytes' 0..255),
// each row then scaled to unit L2 norm when `l2` (--inputs l2).
Examples to_examples(const data::ImageDataset& ds, const std::vector<int64_t>& idx, float divisor,
                     bool l2 = false) {
  Examples ex;
  ex.dim = ds.height() * ds.width();
  ex.classes = static_cast<int32_t>(ds.num_classes());
  const uint8_t* px = ds.images.data<uint8_t>();
  ex.x.resize(idx.size() * ex.dim);
  for (size_t i = 0; i < idx.size(); ++i) {
    for (int64_t k = 0; k < ex.dim; ++k)
      ex.x[i * ex.dim + k] = px[idx[i] * ex.dim + k] / divisor;
    ex.y.push_back(ds.labels[idx[i]]);
    if (l2) {
      double s = 0.0;
      for (int64_t k = 0; k < ex.dim; ++k) s += double(ex.x[i * ex.dim + k]) * ex.x[i * ex.dim + k];
      const float inv = s > 0.0 ? static_cast<float>(1.0 / std::sqrt(s)) : 0.0f;
      for (int64_t k = 0; k < ex.dim; ++k) ex.x[i * ex.dim + k] *= inv;
    }
  }
  return ex;
}

float pixel_divisor(const exp::Flags& f) { return f.str("inputs") == "raw" ? 1.0f : 255.0f; }
bool l2_rows(const exp::Flags& f) { return f.str("inputs") == "l2"; }

class PairSelectionStudy : public exp::Study {
 public:
  std::string name() const override { return "pair_selection"; }
  std::string description() const override {
    return "The informed-pair-selection study (Martin et al. 2018) on MNIST: BASE, DynE, DynEE "
           "and their self-paced (ordered) variants, 10 folds each.";
  }
  bool epoch_shaped() const override { return false; }

  void declare_flags(exp::Flags& f) override { declare_study_flags(f); }

  void check_flags(const exp::Flags& f, bool) const override {
    MN_CHECK(!(f.flag("resume") && !f.str("summarise").empty()), "--resume and --summarise exclude each other: "
             "--summarise only reads a metrics file");
    const std::string dev = f.str("device");
    MN_CHECK(dev == "auto" || dev == "cpu", "--device ", dev, ": pair_selection runs on the CPU only (its "
             "fused batch-16 MLP has no CUDA path); use --device cpu");
    MN_CHECK(f.i64("knn") <= f.i64("budget") && f.i64("exploit-div") >= 1, "--knn ", f.i64("knn"),
             " must not exceed --budget ", f.i64("budget"));
    MN_CHECK(f.i64("eval-every") <= f.i64("epochs"), "--eval-every ", f.i64("eval-every"),
             " exceeds --epochs ", f.i64("epochs"), ": no evaluation would run, so there would be nothing to report");
    MN_CHECK(!f.flag("export-trace") || !f.str("export-dir").empty(), "--export-trace",
             "needs --export-dir (where the traces go)");
  }

  void setup(exp::RunContext& ctx) override {
    MN_CHECK(!ctx.device().is_cuda(), "pair_selection: --device auto chose a GPU, but this study runs on "
             "the CPU only (no CUDA path for its fused MLP): pass --device cpu");
  }

  int run(exp::RunContext& ctx) override {
    const exp::Flags& f = ctx.flags();
    if (!f.str("summarise").empty()) return summarise_only(ctx);
    StudyConfig cfg = study_config(f);
    cfg.seed = ctx.seed();
    const int folds = static_cast<int>(f.i64("folds"));
    std::vector<Method> methods;
    if (f.str("method") == "all")
      for (int m = 0; m < kNumMethods; ++m) methods.push_back(static_cast<Method>(m));
    else
      methods.push_back(method_from_flag(f.str("method")));

    const std::string dir = mnist_dir(f.str("data-dir"));
    const auto mnist = data::load_mnist_family(dir);
    // The scored set: MNIST's test images (the protocol), or with --score-on validation a
    // split held out of the training images, the folds then drawn from the rest (`pool`).
    std::vector<int64_t> pool;
    const std::string export_dir = f.str("export-dir");  // the folds and first pairs, for the reference
    const Examples test = f.str("score-on") == "validation"
                              ? validation_split(f, cfg.seed, mnist.train, export_dir, pool)
                              : to_examples(mnist.test, every_index(mnist.test), pixel_divisor(f), l2_rows(f));
    cfg.mlp.input = test.dim;
    const std::vector<Examples> fold_train = draw_folds(f, cfg.seed, folds, mnist.train, pool, export_dir);
    ctx.summary()["scored_on"] = pool.empty() ? "MNIST test set (10,000 images)"
                                              : "validation split: " + std::to_string(test.y.size()) +
                                                    " MNIST training images held out; folds drawn from the other " +
                                                    std::to_string(pool.size());

    std::vector<Job> jobs;  // fold-major: a stopped study leaves whole folds
    for (int k = 0; k < folds; ++k)
      for (Method m : methods) jobs.push_back({m, k});
    std::vector<RunResult> results(jobs.size());
    std::vector<uint8_t> finished(jobs.size(), 0);
    const size_t restored = restore_finished_runs(ctx, jobs, results, finished);
    // last.safetensors (the configuration, no weights) so a stopped run can --resume.
    ctx.save_progress(nullptr, nullptr, {});
    std::vector<size_t> todo;
    for (size_t j = 0; j < jobs.size(); ++j)
      if (!finished[j]) todo.push_back(j);
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    std::mutex mu;
    size_t done = restored;
    double mean_run_s = 0.0;
    const int threads = f.i64("threads") > 0 ? static_cast<int>(f.i64("threads")) : num_threads();
    const auto t0 = std::chrono::steady_clock::now();
    std::printf("pair_selection: %zu runs (%zu methods x %d folds of %lld images), %d epochs, %d in "
                "parallel on the CPU; MNIST from %s\n",
                jobs.size(), methods.size(), folds, static_cast<long long>(f.i64("budget")), cfg.epochs,
                threads, dir.c_str());
    std::fflush(stdout);
    // One worker per thread pulls whole runs from a shared counter (runs differ
    // in cost, so a static split would leave a thread idle at the end).
    parallel_for(0, threads, 1, [&](int64_t, int64_t) {
      for (size_t t; !stop && (t = next.fetch_add(1)) < todo.size();) {
        const size_t j = todo[t];
        {
          std::lock_guard<std::mutex> lock(mu);
          if (done > restored && ctx.stop_requested(mean_run_s)) {
            stop = true;
            break;
          }
        }
        RunTrace trace;
        const bool tracing = f.flag("export-trace");
        RunResult r = run_fold(jobs[j].m, jobs[j].fold, cfg, fold_train[jobs[j].fold], test,
                               tracing ? &trace : nullptr);
        std::lock_guard<std::mutex> lock(mu);
        if (tracing) export_trace(export_dir, r.method, r.fold, trace, r.method == methods.front());
        log_run(ctx, r);
        ++done;
        ctx.count_step();
        const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        mean_run_s = el * threads / static_cast<double>(done - restored);
        ctx.progress("runs", static_cast<int64_t>(done), static_cast<int64_t>(jobs.size()),
                     {{"accuracy", r.points.empty() ? 0.0 : 100.0 * r.points.back().vote.accuracy}});
        std::printf("[%zu/%zu] %-6s fold %d: %.2f %% at epoch %d (%.1f s)\n", done, jobs.size(),
                    method_label(r.method), r.fold,
                    r.points.empty() ? 0.0 : 100.0 * r.points.back().vote.accuracy,
                    r.points.empty() ? 0 : r.points.back().epoch, r.seconds);
        std::fflush(stdout);
        results[j] = std::move(r);
        finished[j] = 1;
      }
    });
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Keep the folds every method finished (all of them unless stopped).
    std::set<int> incomplete;
    for (size_t j = 0; j < jobs.size(); ++j)
      if (!finished[j]) incomplete.insert(jobs[j].fold);
    std::vector<RunResult> kept;
    for (size_t j = 0; j < jobs.size(); ++j)
      if (finished[j] && !incomplete.count(jobs[j].fold)) kept.push_back(std::move(results[j]));
    MN_CHECK(!kept.empty(), "pair_selection", "stopped before any fold was complete");
    std::ostringstream header;
    header << "# Informed pair selection on MNIST: results\n\nWall time " << exp::format_duration(total)
           << " (" << static_cast<long long>(total) << " s) for " << done << " runs on " << threads
           << " threads (CPU)";
    if (!pool.empty())
      header << "; every evaluation scored on the VALIDATION split (" << test.y.size()
             << " MNIST training images held out, --score-on validation), not the test set";
    if (!incomplete.empty())
      header << "; STOPPED early: " << incomplete.size() << " incomplete folds left out";
    header << ".\n";
    write_outputs(ctx, kept, header.str());
    return stop ? exp::kExitResumable : exp::kExitOk;
  }

 private:
  // Each fold's stratified training sample; with --export-dir also written out, with
  // the fold's first pair set, for the PyTorch reference.
  // Draws from `pool` (indices into train) when it is not empty, else from every
  // training image (the protocol: the folds of every earlier run).
  static std::vector<Examples> draw_folds(const exp::Flags& f, uint64_t seed, int folds, const data::ImageDataset& train,
                                          const std::vector<int64_t>& pool, const std::string& export_dir) {
    std::vector<Examples> fold_train;
    std::vector<std::vector<int64_t>> fold_idx;
    std::vector<std::vector<Pair>> first_pairs;
    std::vector<int32_t> pool_labels;
    for (int64_t i : pool) pool_labels.push_back(train.labels[static_cast<size_t>(i)]);
    for (int k = 0; k < folds; ++k) {
      Generator g(fold_seed(seed, k, 0), 0);
      if (pool.empty()) {
        fold_idx.push_back(stratified_sample(train.labels, f.i64("budget"), g));
      } else {
        std::vector<int64_t> idx = stratified_sample(pool_labels, f.i64("budget"), g);
        for (int64_t& i : idx) i = pool[static_cast<size_t>(i)];
        fold_idx.push_back(std::move(idx));
      }
      fold_train.push_back(to_examples(train, fold_idx.back(), pixel_divisor(f), l2_rows(f)));
      if (export_dir.empty()) continue;
      Generator pg(fold_seed(seed, k, 2), 0);  // run_fold's first draw from its pair stream
      first_pairs.push_back(random_pairs(fold_train.back().y, pg));
    }
    if (!export_dir.empty()) export_folds(export_dir, f.to_json(), fold_idx, first_pairs);
    return fold_train;
  }

  static std::vector<int64_t> every_index(const data::ImageDataset& ds) {
    std::vector<int64_t> all(static_cast<size_t>(ds.size()));
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    return all;
  }

  // --score-on validation: --val-size training images held out (stratified by class, from
  // their own seeded stream), returned as examples (their indices written to
  // export_dir/validation.txt when given); `pool` gets the other training images.
  static Examples validation_split(const exp::Flags& f, uint64_t seed, const data::ImageDataset& train,
                                   const std::string& export_dir, std::vector<int64_t>& pool) {
    const int64_t n = f.i64("val-size");
    MN_CHECK(n + f.i64("budget") <= train.size(), "--val-size ", n, " leaves fewer than --budget ", f.i64("budget"),
             " of MNIST's ", train.size(), " training images for the folds");
    Generator g(fold_seed(seed, -1, 4), 0);
    std::vector<int64_t> held = stratified_sample(train.labels, n, g);
    std::vector<uint8_t> out(static_cast<size_t>(train.size()), 0);
    for (int64_t i : held) out[static_cast<size_t>(i)] = 1;
    pool.clear();
    for (int64_t i = 0; i < train.size(); ++i)
      if (!out[static_cast<size_t>(i)]) pool.push_back(i);
    if (!export_dir.empty()) {  // beside folds.txt
      fs::create_directories(export_dir);
      std::ostringstream os;
      for (size_t i = 0; i < held.size(); ++i) os << (i ? " " : "") << held[i];
      exp::write_file_atomic((fs::path(export_dir) / "validation.txt").string(), os.str() + "\n");
    }
    return to_examples(train, held, pixel_divisor(f), l2_rows(f));
  }

  struct Job {
    Method m;
    int fold;
  };

  // --resume: the finished runs are in metrics.jsonl (a run's lines are written at
  // once when it ends): keep them, drop a run cut short, rerun the rest. Returns how
  // many runs were restored into `results` (marked in `finished`).
  static size_t restore_finished_runs(exp::RunContext& ctx, const std::vector<Job>& jobs,
                                      std::vector<RunResult>& results, std::vector<uint8_t>& finished) {
    if (!ctx.resuming()) return 0;
    size_t restored = 0;
    const std::string log = ctx.out_path("metrics.jsonl");
    if (fs::exists(log)) {
      std::string kept;
      std::vector<RunResult> prev = read_finished_runs(log, &kept);
      exp::write_file_atomic(log, kept);
      for (RunResult& r : prev)
        for (size_t j = 0; j < jobs.size(); ++j)
          if (!finished[j] && jobs[j].m == r.method && jobs[j].fold == r.fold) {
            results[j] = std::move(r);
            finished[j] = 1;
            ++restored;
            break;
          }
    }
    std::printf("pair_selection: resuming, %zu of %zu runs already finished\n", restored, jobs.size());
    return restored;
  }

  // One metrics.jsonl line per evaluation of a finished run.
  static void log_run(exp::RunContext& ctx, const RunResult& r) {
    for (const EvalPoint& p : r.points) {
      exp::Json line;
      line["method"] = method_label(r.method);
      line["fold"] = r.fold;
      line["epoch"] = p.epoch;
      line["accuracy"] = exp::metric_number(p.vote.accuracy);
      line["nearest_accuracy"] = exp::metric_number(p.vote.nearest_accuracy);
      line["abstain_share"] = exp::metric_number(p.vote.abstain_share);
      line["train_loss"] = exp::metric_number(p.train_loss);
      line["genuine_pairs"] = p.genuine_pairs;
      line["seconds"] = exp::metric_number(r.seconds);
      ctx.log_metrics(line);
    }
  }

  static std::string mnist_dir(const std::string& flag) {
    if (!flag.empty())
      return fs::is_directory(fs::path(flag) / "mnist") ? (fs::path(flag) / "mnist").string() : flag;
    const std::string d = data::find_dataset_dir("mnist");
    MN_CHECK(!d.empty(), "pair_selection: --data-dir",
             "MNIST not found in $MN_DATA_DIR, $DATA_DIR, ./datasets or ../shared/datasets "
             "(subfolder mnist); pass --data-dir");
    return d;
  }

  int summarise_only(exp::RunContext& ctx) {
    const std::string src = ctx.flags().str("summarise");
    int dropped = 0;
    const auto runs = read_runs_jsonl(src, &dropped);
    MN_CHECK(!runs.empty(), "pair_selection: --summarise", src, " holds no complete fold");
    std::set<int> folds;
    for (const auto& r : runs) folds.insert(r.fold);
    std::ostringstream header;
    header << "# Informed pair selection on MNIST: results\n\nSummarised from " << src << ": "
           << runs.size() << " runs over " << folds.size() << " complete folds";
    if (dropped) header << " (" << dropped << " incomplete folds left out)";
    header << ".\n";
    write_outputs(ctx, runs, header.str());
    return exp::kExitOk;
  }

  // results.md / results.json / figure2.png, summary.json fields and report.md.
  void write_outputs(exp::RunContext& ctx, const std::vector<RunResult>& runs,
                     const std::string& header) {
    const double alpha = ctx.flags().f64("alpha");
    const auto curves = summarise(runs);
    const std::string md = results_markdown(curves, alpha, header);
    // results.md carries the run's provenance (its commit, machine and command) as every
    // study's results.md does; report.md gets the harness's own block.
    const exp::Json& s0 = ctx.summary();
    exp::write_file_atomic(ctx.out_path("results.md"),
                           s0.contains("provenance") ? md + "\n## Provenance\n\n" +
                                                           exp::provenance_markdown(s0["provenance"])
                                                     : md);
    exp::write_file_atomic(ctx.out_path("results.json"), results_json(curves, alpha, ctx.flags().to_json()));
    const bool plotted = plot_figure(ctx.out_path("figure2.png"), curves);
    exp::Json& s = ctx.summary();
    for (const Curve& c : curves) {
      exp::Json m;
      m["final_epoch"] = c.epochs.back();
      m["accuracy_percent"] = exp::metric_number(c.mean.back());
      m["sd_percent"] = exp::metric_number(c.sd.back());
      if (!c.vs_base.empty()) m["p_greater_than_base"] = exp::metric_number(c.vs_base.back().p_greater);
      s["methods"][method_label(c.method)] = m;
    }
    ctx.report(md.substr(md.find("## Table 2")));
    std::printf("pair_selection: %s%s\n", ctx.out_path("results.md").c_str(),
                plotted ? ", figure2.png" : " (gnuplot missing: figure2.png.gp left)");
  }
};

}  // namespace

int main(int argc, char** argv) {
  return exp::run_study(std::make_unique<PairSelectionStudy>(), argc, argv);
}
