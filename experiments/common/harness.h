// The study harness: what every experiment binary shares, so that a study is
// only its flags, data, model, training step and evaluation.
//
// A study implements `Study` (below); its main() is one line:
//     int main(int argc, char** argv) { return mn::exp::run_study(make_my_study(), argc, argv); }
//
// The harness owns everything else:
//   * flags: it declares the run flags (--config, --device, --seed, --out-dir,
//     --resume, --time-limit, --stop-after, --precision; --epochs for epoch-shaped
//     studies; --evaluate when the study can evaluate a checkpoint), parses the
//     command line and config file, checks every flag's declared range and then
//     Study::check_flags() BEFORE any data is loaded (exit status 2 on a bad flag);
//   * device choice (--device auto|cpu|cuda|cuda:N; never a silent fallback),
//     --precision, and the seed (Study reads ctx.seed());
//   * the out dir: config.txt, metrics.jsonl, summary.json, report.md (also
//     printed), learning_curve.png (gnuplot; its .dat/.gp inputs are removed
//     once drawn), last.safetensors after every epoch and best.safetensors for
//     the best validation score. best.safetensors is written first, then
//     last.safetensors with best's XXH3 content hash ("best_xxh3"); the final
//     test hashes best.safetensors before and after loading it, refuses a file
//     that is not the one written for the best epoch, and summary.json's
//     "best_checkpoint" names its file, epoch and hash;
//   * progress: one line with the phase, the step's stats, throughput and the
//     ETA of the whole run (training steps, validations and the final test);
//     the step's stats stay on its device (DeviceStats) and are read every
//     --log-every steps (every step on the CPU, 50 on a GPU);
//   * on a GPU, a split step (split_step()) runs as a CUDA graph: warm-up,
//     audit, one capture, replays (--cuda-graph; runtime/graph.h); the verdict
//     goes to summary.json ("cuda_graph"), also from the CPU's audit;
//   * resumable stops: --time-limit (honoured to within a few seconds: the next
//     step, the next validation and the checkpoint write are each estimated
//     from their measured cost, the first validation from the training speed
//     and Study::validation_work()), --stop-after and SIGINT/SIGTERM stop at the
//     next step boundary, save last.safetensors and exit with status 3; a time
//     limit too short for even one step is an error (status 2);
//   * the resume contract: a checkpoint stores the full resolved configuration;
//     --resume restores all of it; a flag given (command line or config file)
//     that differs from the stored value is an error naming the flag and both
//     values, except the flags in kResumeMayChange (and Study::resume_may_change()).
//     Missing or malformed checkpoint metadata is an error naming the file and
//     the key. Mid-epoch resumes are exact (the study saves its RNG states).
//   * --evaluate CKPT: checks the checkpoint was written by this study (a
//     triplet checkpoint given to the siamese binary is an error), restores the
//     flags of Study::architecture_keys() from it, loads the weights and runs
//     Study::final_test(); writes evaluation.json.
//   * main(): every exception becomes one line on stderr in the user's words
//     (mn::user_message: no failed check, no source location; MN_DEBUG_ERRORS=1
//     appends them) and a non-zero status (2: usage, 1: a failed run, 3: stopped,
//     resumable).
//
// Two shapes of study:
//   * epoch-shaped (epoch_shaped() true, the default): the harness runs
//     epochs x steps_per_epoch() calls of train_step(), validate() after each
//     epoch, keeps the best by selection_metric(), then final_test() on the best;
//   * custom (epoch_shaped() false): e.g. 10 folds x 100 epochs of a small MLP,
//     or a convex solver with no epochs. The harness calls run(ctx) once; the
//     study runs its own loop and uses ctx for metrics lines, progress, stop
//     requests, summary fields and report sections. Flags, config, out dir,
//     device, seed, summary.json, report.md and main() are still the harness's.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "experiments/common/flags.h"
#include "experiments/common/json.h"
#include "experiments/common/metrics.h"
#include "experiments/common/progress.h"
#include "nn/checkpoint.h"
#include "runtime/comm.h"
#include "runtime/device.h"
#include "runtime/tensor.h"

namespace mn::nn {
class Module;
class Optimizer;
}  // namespace mn::nn

namespace mn::exp {

// Named scalars in a fixed order, e.g. {{"train_loss", 0.2}, {"active_share", 0.8}}.
using Stats = std::vector<std::pair<std::string, double>>;

// A training step's statistics left where the step computed them: values is a
// (k) float64 tensor on the step's device, names[i] names values[i]. The
// harness adds the steps' values up on that device and reads the sums to the
// host every --log-every steps and at the end of an epoch (or a stop), so a GPU
// step does not wait for the host to print its loss. The first entry is the
// loss; a non-finite sum stops the run (at the next read).
struct DeviceStats {
  std::vector<std::string> names;
  Tensor values;
};
// The tensors a split step's compute_step() reads (harness.h, split_step), at
// addresses that stay the same from step to step (a CUDA graph replays them):
// keep(i, t) copies a device tensor t into slot i, allocated like t on first
// use and again when t's shape, dtype or device changes, which bumps
// generation() (put it in the study's graph_key()); a CPU tensor is taken as it
// is (no graph there, no copy).
class StepInputs {
 public:
  void keep(size_t i, const Tensor& t);
  const Tensor& operator[](size_t i) const;
  uint64_t generation() const { return generation_; }

 private:
  std::vector<Tensor> slots_;
  uint64_t generation_ = 0;
};

// Host values as DeviceStats on the CPU (what the default train_step_on_device() returns).
DeviceStats host_device_stats(const Stats& s);

// Flags that may differ between a run and its --resume (documented in --help):
// they change how long or where the run goes on, not what it computes.
// --epochs is restored from the checkpoint when not given again.
extern const std::vector<std::string> kResumeMayChange;

// Exit statuses of run_study().
constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitResumable = 3;

// What the harness hands a study.
class RunContext {
 public:
  virtual ~RunContext() = default;
  virtual const Flags& flags() const = 0;
  virtual Device device() const = 0;
  virtual uint64_t seed() const = 0;
  virtual const std::string& out_dir() const = 0;
  virtual std::string out_path(const std::string& file) const = 0;  // out_dir/file
  virtual bool resuming() const = 0;

  // --- for custom-shaped studies (the epoch loop does these itself) ---
  // Appends one line to metrics.jsonl (give it an "epoch" or "fold" key).
  virtual void log_metrics(const Json& line) = 0;
  // Progress of the whole run: `done` of `total` units in phase `label`.
  virtual void progress(const std::string& label, int64_t done, int64_t total, const Stats& stats = {}) = 0;
  // True when the run must stop now: a signal, --stop-after steps, or
  // --time-limit would be overrun by work costing `next_cost_s` seconds plus
  // a checkpoint write. A custom study then saves what it needs and returns
  // kExitResumable from run().
  virtual bool stop_requested(double next_cost_s) = 0;
  // Counts one step towards --stop-after.
  virtual void count_step() = 0;
  // Writes out_dir/last.safetensors atomically: `model` and `opt` (either may
  // be null) and `md` plus the study's name and full configuration, so that
  // --resume and its contract work; the study reads it back on --resume with
  // nn::load_checkpoint(ctx.out_path("last.safetensors"), ...).
  virtual void save_progress(nn::Module* model, const nn::Optimizer* opt, nn::Metadata md) = 0;
  // Fields of summary.json and sections of report.md (markdown).
  virtual Json& summary() = 0;
  virtual void report(const std::string& markdown) = 0;

  // ---- data-parallel runs (`mpirun -np N`, runtime/comm.h; Study::data_parallel) ----
  // The host communicator (MPI under mpirun, "single" otherwise), this process's rank
  // and the world's size. Rank 0 alone writes the outputs, validates and tests.
  Communicator& comm() const { return world(); }
  int rank() const { return comm().rank(); }
  int world_size() const { return comm().size(); }
  // The communicator for the tensors of `device`: comm() for the CPU, an NCCL
  // communicator over the same ranks for a GPU (made on first use).
  Communicator& device_comm() const;
};

class Study {
 public:
  virtual ~Study() = default;

  // ---- identity and flags (before any data) ----
  virtual std::string name() const = 0;         // binary name, "study" in checkpoints and summary.json
  virtual std::string description() const = 0;  // first line of --help
  virtual std::string default_out_dir() const { return "runs/" + name(); }
  virtual int64_t default_epochs() const { return 10; }
  // Declares the study's own flags (with ranges; see Flags).
  virtual void declare_flags(Flags& f) = 0;
  // After parsing, before validation: fill presets (values the user did not set),
  // knowing the device and whether this is an --evaluate run.
  virtual void apply_presets(Flags&, Device, bool /*evaluating*/) {}
  // After apply_presets in a run (not in study_config): print what the presets chose.
  virtual void announce_presets(const Flags&) const {}
  // Cross-flag checks and input paths; throw mn::Error naming the flag and the fix.
  virtual void check_flags(const Flags&, bool /*evaluating*/) const {}
  // Extra flags that may change on --resume (besides kResumeMayChange).
  virtual std::vector<std::string> resume_may_change() const { return {}; }
  // Flags that define the model (restored from a checkpoint by --evaluate).
  virtual std::vector<std::string> architecture_keys() const { return {}; }
  // Further flags --evaluate restores from the checkpoint unless given (how the
  // run scored its model, e.g. a distance that follows from its loss).
  virtual std::vector<std::string> evaluation_keys() const { return {}; }
  virtual bool can_evaluate() const { return false; }

  // ---- set-up (after validation) ----
  // Loads data and builds model and optimizer. `ctx` gives flags, device, seed.
  virtual void setup(RunContext& ctx) = 0;

  // ---- epoch-shaped studies ----
  virtual bool epoch_shaped() const { return true; }
  virtual int64_t steps_per_epoch() const { return 0; }
  // The flag that sets steps_per_epoch() (e.g. "iters"), named when a resumed
  // checkpoint stopped beyond the end of an epoch; "": none the user sets directly.
  virtual std::string steps_per_epoch_flag() const { return ""; }
  // Throughput: items (e.g. images) per step, shown as "<items_name>/s" and
  // logged as "<items_name>_per_second"; 0: steps per second.
  virtual int64_t items_per_step() const { return 0; }
  virtual std::string items_name() const { return "images"; }
  // Called before the first step of each epoch (1-based), also a resumed one:
  // learning-rate and momentum schedules.
  virtual void begin_epoch(int64_t /*epoch*/) {}
  // One training step. The first entry is the loss (a non-finite value stops
  // the run with status 1); the epoch's metrics line holds each entry's mean.
  virtual Stats train_step() { return must_override("train_step"); }
  // The same step with its statistics left on the device (DeviceStats). The
  // harness calls this one; the default runs train_step() and wraps its host
  // values. A GPU study overrides it so the step makes no host read.
  virtual DeviceStats train_step_on_device() { return host_device_stats(train_step()); }

  // ---- a step that can run as a CUDA graph (--cuda-graph, runtime/graph.h) ----
  // A study whose step splits into prepare_step(), the host's part (sampling,
  // uploads copied into tensors that stay the same from step to step,
  // augmentation), and compute_step(), the device's (forward, loss, backward,
  // update, returning its stats), returns true here; the harness then runs the
  // two itself instead of train_step_on_device(). On a GPU it runs a few steps
  // eagerly, audits one (a host read, upload or random draw inside
  // compute_step() keeps the graph off, with the reason logged), then captures
  // compute_step() once and replays it every step, capturing again whenever
  // graph_key() changes. On the CPU the audit still runs and its verdict goes
  // to summary.json ("cuda_graph").
  virtual bool split_step() const { return false; }
  virtual void prepare_step() {}
  virtual DeviceStats compute_step() { return host_device_stats(must_override("compute_step")); }
  // The host values compute_step() passes to kernels (e.g. the optimizer's
  // graph_key(): learning rates): a captured graph replays them.
  virtual std::string graph_key() const { return ""; }
  // Validation after each epoch; selection_metric() names the entry (higher is
  // better) that picks best.safetensors.
  virtual Stats validate() { return must_override("validate"); }
  virtual std::string selection_metric() const { return must_override("selection_metric"), ""; }
  // True for a study that reports its final model (its selection metric only grows with
  // the epoch, e.g. the epoch's index): the report then says "the last epoch's model"
  // instead of naming a best validation score.
  virtual bool keeps_last_epoch() const { return false; }
  // Items (e.g. images) a validation embeds: with the training speed this
  // estimates the first validation's cost for --time-limit.
  virtual int64_t validation_work() const { return 0; }
  // Further entries of the epoch's metrics line after validation (e.g. "lr").
  virtual Stats epoch_extras() const { return {}; }
  // Final evaluation with the best model loaded (also --evaluate): writes its
  // results into `out` (summary.json / evaluation.json) and returns report lines.
  virtual std::string final_test(Json& /*out*/) { return ""; }

  // ---- checkpoints (epoch-shaped studies and --evaluate) ----
  // (A custom-shaped study without a module need not implement these.)
  virtual nn::Module& model() { return must_override("model"), *static_cast<nn::Module*>(nullptr); }
  virtual nn::Optimizer* optimizer() { return nullptr; }
  // Study state beyond weights and optimizer (RNG states, loaders).
  virtual void save_state(nn::Metadata&) const {}
  virtual void load_state(const nn::Metadata&, const std::string& /*file*/) {}
  // Plot title and axis label of the learning curve.
  virtual std::string plot_title() const { return name(); }

  // ---- data-parallel runs (mpirun -np N) ----
  // True when the study splits its steps over ranks: every rank draws the same
  // global batch from the shared seed, computes its own rows, and the gradients
  // are averaged (nn/distributed.h). The harness refuses mpirun -np N > 1 for a
  // study that returns false, and keeps every rank's stops, validation (rank 0)
  // and outputs (rank 0) in step.
  virtual bool data_parallel() const { return false; }
  // What summary.json ("data_parallel") and the report say about such a run
  // (e.g. where the miner runs); called on rank 0 at the final test.
  virtual Json data_parallel_summary() const { return Json::object(); }

  // ---- custom-shaped studies ----
  // Runs the whole study; returns an exit status (kExitResumable after a stop).
  virtual int run(RunContext&) { return must_override("run"), kExitFailed; }

 protected:
  // Throws: a hook the study's shape needs was not implemented.
  [[noreturn]] Stats must_override(const char* hook) const;
};

// Parses flags, validates, runs, reports. Catches everything: returns the
// exit status; never throws.
int run_study(std::unique_ptr<Study> study, int argc, char** argv);

// The configuration a run of `st` with `args` (argv without the program name) would
// use on `device`, after the study's presets and the flags' range checks (no data is
// read, no folder made; Study::check_flags, which looks at paths, is not run): every
// flag's value as config text. Throws the error the run would print.
// For drivers that plan runs (grids) and for tests of their flag sets.
std::map<std::string, std::string> study_config(Study& st, const std::vector<std::string>& args, Device device);

// Typed checkpoint metadata: errors name the file and the key.
int64_t md_int(const nn::Metadata& md, const std::string& key, const std::string& file, int64_t lo, int64_t hi);
double md_double(const nn::Metadata& md, const std::string& key, const std::string& file);
const std::string& md_string(const nn::Metadata& md, const std::string& key, const std::string& file);
// 17 significant digits: a double read back bit-exactly.
std::string exact_text(double v);

// True when `path` is an existing folder.
bool is_directory(const std::string& path);
// mkdir -p; throws naming `flag` when it cannot.
void make_dirs(const std::string& path, const std::string& flag);
// Throws naming `flag` when `path` exists and is not a folder (creates nothing).
void check_dir_usable(const std::string& path, const std::string& flag);

}  // namespace mn::exp
