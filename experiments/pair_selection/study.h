// One run of the informed-pair-selection study: one method on one fold (a
// seeded stratified subsample of the training set), trained for the study's
// epochs with the method's pair selection, scored on the test set every
// `eval_every` epochs with the prototype vote. Methods share, per fold, the
// sample, the initial weights and the first random pair set ("every algorithm
// starts from the same sample in a given fold").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "experiments/pair_selection/pairs.h"
#include "experiments/pair_selection/siamese_mlp.h"
#include "experiments/pair_selection/vote.h"

namespace mn::pairsel {

enum class Method { Base = 0, BaseOrdered, DynE, DynEOrdered, DynEE, DynEEOrdered };
constexpr int kNumMethods = 6;
const char* method_flag(Method m);   // "base", "base-ordered", ...
const char* method_label(Method m);  // "BASE", "BASE*", ...
Method method_from_flag(const std::string& s);  // throws for an unknown name
bool method_ordered(Method m);

// The vote's class prototypes (Eqs. 4-5): the embedding of each class's mean
// training image (the authors' LMRD code: class centroids of the inputs, then
// embedded) or the mean of the class's embedded training images.
enum class Prototype { InputCentroid, EmbeddingCentroid };

struct StudyConfig {
  MlpConfig mlp;
  Prototype prototype = Prototype::InputCentroid;
  int epochs = 100;
  int cycle = 5;             // epochs per pair-selection cycle
  int eval_every = 5;        // test accuracy every this many epochs
  int64_t exploit_div = 6;   // DynEE: b = |P| / exploit_div highest-loss pairs replaced
  int knn = 5;               // Eq. 6 neighbourhood, the point itself included
  uint64_t seed = 1;
};

// Inputs (n, dim) in [0, 1] and labels in [0, classes).
struct Examples {
  std::vector<float> x;
  std::vector<int32_t> y;
  int64_t dim = 0;
  int32_t classes = 0;
  int64_t size() const { return static_cast<int64_t>(y.size()); }
};

struct EvalPoint {
  int epoch = 0;
  VoteResult vote;
  double train_loss = 0.0;  // mean over the last epoch's pairs
  int64_t genuine_pairs = 0;  // genuine pairs in the epoch's set (exploit pairs vary)
};

// Optional record of a run for the PyTorch reference's replay check
// (bench/references/pair_selection_torch.py --replay): the initial weights and
// every epoch's training pairs in the order they were trained.
struct RunTrace {
  std::vector<std::vector<float>> weights, biases;  // per layer: (in, out), (out)
  std::vector<std::vector<Pair>> epoch_pairs;        // (epochs) x (|P|)
};

struct RunResult {
  Method method = Method::Base;
  int fold = 0;
  std::vector<EvalPoint> points;
  double seconds = 0.0;
};

// Seeds of fold `fold` (sample, init, pairs) derived from cfg.seed.
uint64_t fold_seed(uint64_t seed, int fold, uint64_t stream);

// Trains and evaluates one method on one fold's training examples.
// `trace` (optional) receives the initial weights and each epoch's pairs.
RunResult run_fold(Method method, int fold, const StudyConfig& cfg, const Examples& train,
                   const Examples& test, RunTrace* trace = nullptr);

// The prototypes (classes, E) in the current embedding: embedded input
// centroids or centroids of the embedded training rows. `train_emb` (n, E)
// must hold the current embeddings of `train` for EmbeddingCentroid.
std::vector<float> prototypes(SiameseMlp& net, Prototype kind, const Examples& train,
                              const std::vector<float>& input_centroids,
                              const std::vector<float>& train_emb);

}  // namespace mn::pairsel
