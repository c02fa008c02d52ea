// The harness's epoch loop (private; studies include harness.h): the class and
// the state it stores in a checkpoint. Its methods live in three files by phase:
//   epoch_loop.cpp       start (resume, outputs), the training steps and the reads of
//                        their statistics, the ETA, a resumable stop (stop_now)
//   epoch_validation.cpp per epoch: validation, the metrics line, best and last
//                        checkpoints, the learning curve
//   final_test.cpp       the final test on the best model, summary.json and report.md
// put_progress and load_progress (resume.cpp) write and read LoopState.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "experiments/common/harness_internal.h"
#include "experiments/common/step_runner.h"

namespace mn::exp {

struct LoopState {
  int64_t start_epoch = 0, start_iter = 0, best_epoch = -1;
  double best = -1.0 / 0.0, total_train_s = 0, last_val_s = -1, step_s = 0;
  Stats partial;  // the running sums of a resumed epoch, in the step's order
  double partial_train_s = 0;
  // XXH3 of best.safetensors as written (file_hash.h; "" before the first best,
  // or resumed from a checkpoint of a version that did not store it).
  std::string best_hash;
};

// The loop's progress into a checkpoint's metadata: `epochs_done` epochs and `iter`
// steps of the next, with that epoch's running sums and training time.
void put_progress(nn::Metadata& md, const LoopState& ls, int64_t epochs_done, int64_t iter, const Stats& sums,
                  double epoch_train_s, double best, int64_t best_epoch);
// --resume: loads `file` into the study's model and optimizer (after the architecture
// and world size checks) and returns the stored progress; an epoch of `iters` steps.
LoopState load_progress(Study& st, const Flags& f, const std::string& file, int64_t iters);

// The epoch loop in named phases: start (resume, outputs), per epoch the training
// steps (with the reads of their statistics), validation and the checkpoints, a
// resumable stop at any step boundary, and the final test. The loop's state lives in
// the members; each phase is a method a reader can hold in their head.
class EpochLoop {
 public:
  EpochLoop(Study& st, Context& ctx);

  int run();

 private:
  // One epoch's running state: the summed step statistics and training time, and the
  // steps since the last host read (summed on the step's device).
  struct EpochState {
    int64_t first_it = 1;
    Stats sums;
    double train_s = 0;
    std::chrono::steady_clock::time_point seg_start;
    int64_t seg_items = 0;
    Tensor pending;
    int64_t pending_first = 0, last_it = 0;
    double seg_seconds() const {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - seg_start).count();
    }
  };

  // --- epoch_loop.cpp ---
  // Resume (or not), config.txt, the metrics log, the step runner, the curves so far.
  void start();
  EpochState begin_epoch_state(int64_t epoch);
  // Cost estimates for --time-limit and the ETA.
  double val_estimate() const;
  void update_eta(int64_t epoch, int64_t it, bool validated);
  // The steps of one epoch from e.first_it: kExitOk at the epoch's end, or the stop's
  // or the failure's status.
  int train_steps(int64_t epoch, EpochState& e);
  // One training step: its statistics checked and added to the pending sum, and every
  // --log-every steps (and at the epoch's end) read into the epoch's sums and shown.
  int one_step(int64_t epoch, int64_t it, EpochState& e);
  // The pending statistics read to the host and added to the epoch's sums; a
  // non-finite loss stops the run (kExitFailed) naming the steps.
  int read_pending(int64_t epoch, EpochState& e);
  void show_progress(int64_t epoch, int64_t it, const EpochState& e);
  // A resumable stop after `done` steps of `epoch`: last.safetensors with the partial
  // epoch, exit status 3. A stop before the first step of a fresh run is an error.
  int stop_now(int64_t epoch, int64_t done, const Stats& sums, double epoch_train_s);
  nn::Metadata progress_metadata() const;

  // --- epoch_validation.cpp ---
  // The epoch's validation, its metrics line, the best and last checkpoints, the curve.
  void validate_and_save(int64_t epoch, const EpochState& e);
  void save_epoch(int64_t epoch, bool improved);
  void add_point(const Json& l);

  // --- final_test.cpp ---
  // The final test with the model selected on validation, summary.json and report.md.
  int final_test();
  std::string data_parallel_line(const Json& sum) const;
  std::string model_line() const;
  // Loads best.safetensors (verified against the hash taken when it was written) for
  // the final test; null when no epoch had a finite validation score (the last model).
  Json load_best_model();

  Study& st_;
  Context& ctx_;
  const Flags& f_;
  const bool rank0_, dist_;  // rank 0 alone validates and writes; dist_: more than one rank
  const std::string last_, best_path_;
  const int64_t epochs_, iters_, items_;
  const std::string sel_, item_name_;
  LoopState ls_;
  MetricsLog* log_ = nullptr;
  std::unique_ptr<StepRunner> runner_;
  int64_t log_every_ = 1;
  std::vector<Series> curves_;
};

}  // namespace mn::exp
