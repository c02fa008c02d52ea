// The pair_selection binary's flags; see options.h.
#include "experiments/pair_selection/options.h"

namespace mn::pairsel {

void declare_study_flags(exp::Flags& f) {
  f.add_string("method", "all", "which methods to run",
               {"all", "base", "base-ordered", "dyne", "dyne-ordered", "dynee", "dynee-ordered"});
  f.add_int("folds", 10, "folds (seeded stratified subsamples), each tested on the full test set", 1, 1000);
  f.add_int("budget", 600, "training images per fold (1 % of MNIST's 60,000)", 20, 60000);
  f.add_int("epochs", 100, "training epochs", 1, 100000);
  f.add_int("cycle", 5, "epochs per pair-selection cycle (DynE, DynEE; the re-ordering of DynE*, DynEE*)", 1, 100000);
  f.add_int("eval-every", 5, "test accuracy every this many epochs", 1, 100000);
  f.add_int("batch", 16, "pairs per SGD step", 1, 100000);
  // The protocol's open choices: the paper states none of optimiser, rate,
  // initialisation, dropout, input scale or prototype for MNIST; the defaults
  // are the authors' LMRD code (Keras 1.2) where it has one.
  f.add_double("lr", 1e-3, "learning rate of --optimizer (paper: not stated; LMRD code: SGD 1e-3)", 0.0, 1e3);
  f.add_double("momentum", 0.8, "sgd: momentum, Keras form v = mu v - lr g (LMRD code: 0.8)", 0.0, 0.999999);
  f.add_string("optimizer", "sgd", "sgd (with --momentum; the authors' LMRD code), rmsprop (Keras 1.2's, "
             "--rho, --eps: the optimiser of Keras's mnist_siamese example) or adam (the library's fused "
             "Adam, --beta1 --beta2 --eps); the paper names none", {"sgd", "rmsprop", "adam"});
  f.add_double("rho", 0.9, "rmsprop: decay of the squared-gradient average (Keras 1.2: 0.9)", 0.0, 0.999999);
  f.add_double("beta1", 0.9, "adam: first-moment decay", 0.0, 0.999999);
  f.add_double("beta2", 0.999, "adam: second-moment decay", 0.0, 0.999999);
  f.add_double("eps", 1e-8, "rmsprop / adam: denominator epsilon (Keras 1.2 and PyTorch: 1e-8)", 1e-30, 1.0);
  f.add_string("init", "glorot", "weight initialisation: glorot (Keras 1.2 Dense: Glorot-uniform weights, zero "
             "biases; the LMRD code's) or torch (PyTorch nn.Linear: U(+-1/sqrt(fan_in)) weights and biases); "
             "the paper does not say", {"glorot", "torch"});
  f.add_double("dropout", 0.2, "dropout after each hidden layer but the last (LMRD code: 0.2; paper: not stated)",
               0.0, 0.99);
  f.add_string("inputs", "unit", "input scale: unit ([0, 1], the Keras mnist_siamese example's), raw (0..255, "
             "the IDX bytes unscaled) or l2 ([0, 1] then each image L2-normalised, as the LMRD code "
             "normalises its document vectors); the paper does not say", {"unit", "raw", "l2"});
  f.add_string("prototype", "input-centroid", "the vote's class prototypes: input-centroid (the embedding of "
             "each class's mean training image: the LMRD code's centroids) or embedding-centroid (the mean "
             "of the class's embedded training images); the paper says only 'prototype'",
               {"input-centroid", "embedding-centroid"});
  f.add_string("export-dir", "", "write the folds (MNIST training indices) and each fold's first pair set "
             "here for the PyTorch reference (bench/references/pair_selection_torch.py)");
  f.add_bool("export-trace", false, "with --export-dir: also each fold's initial weights and every run's "
             "epoch-by-epoch training pairs (large: for tiny runs and the reference's replay check)");
  f.add_double("margin", 1.0, "contrastive margin M, also the vote's genuine threshold D < M", 1e-9, 1e9);
  f.add_int("width", 300, "units per dense layer", 1, 100000);
  f.add_int("layers", 3, "dense layers (ReLU after each)", 1, 100);
  f.add_int("exploit-div", 6, "DynEE replaces the |P| / this highest-loss pairs (MNIST: |P|/6)", 1, 1000000);
  f.add_int("knn", 5, "neighbourhood size k of the complexity measure (Eq. 6), self included", 1, 1000);
  f.add_double("alpha", 0.05, "significance level of the one-tailed paired t-test", 1e-9, 0.5);
  f.add_string("score-on", "test", "the set every evaluation scores: test (MNIST's 10,000 test images, the "
               "protocol's) or validation (--val-size images held out of MNIST's training images, the folds drawn "
               "from the rest: for fitting the protocol's open choices without looking at the test set)",
               {"test", "validation"});
  f.add_int("val-size", 10000, "--score-on validation: training images held out (stratified, seeded by --seed)",
            100, 50000);
  f.add_int("threads", 0, "runs in parallel (0: the thread pool's size, MN_NUM_THREADS or all cores)", 0, 1024);
  f.add_string("data-dir", "", "MNIST IDX folder (default: $MN_DATA_DIR, ./datasets or ../shared/datasets, subfolder mnist)");
  f.add_string("summarise", "", "no training: write results.md, results.json and figure2.png in --out-dir "
             "from this metrics.jsonl of an earlier (possibly stopped) study: its complete folds");
  }

StudyConfig study_config(const exp::Flags& f) {
  StudyConfig cfg;
  cfg.epochs = static_cast<int>(f.i64("epochs"));
  cfg.cycle = static_cast<int>(f.i64("cycle"));
  cfg.eval_every = static_cast<int>(f.i64("eval-every"));
  cfg.exploit_div = f.i64("exploit-div");
  cfg.knn = static_cast<int>(f.i64("knn"));
  cfg.mlp.batch = f.i64("batch");
  cfg.mlp.lr = f.f64("lr");
  cfg.mlp.momentum = f.f64("momentum");
  const std::string opt = f.str("optimizer");
  cfg.mlp.optimizer = opt == "rmsprop" ? Optimizer::RmsProp : opt == "adam" ? Optimizer::Adam : Optimizer::Sgd;
  cfg.mlp.rho = f.f64("rho");
  cfg.mlp.beta1 = f.f64("beta1");
  cfg.mlp.beta2 = f.f64("beta2");
  cfg.mlp.eps = f.f64("eps");
  cfg.mlp.init = f.str("init") == "torch" ? Init::Torch : Init::Glorot;
  cfg.prototype = f.str("prototype") == "embedding-centroid" ? Prototype::EmbeddingCentroid
                                                            : Prototype::InputCentroid;
  cfg.mlp.dropout = f.f64("dropout");
  cfg.mlp.margin = f.f64("margin");
  cfg.mlp.hidden.assign(static_cast<size_t>(f.i64("layers")), f.i64("width"));
  return cfg;
}

}  // namespace mn::pairsel
