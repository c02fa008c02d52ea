// The Omniglot grid's rows and scales (grid.h). Every number in paper_val / paper_eval
// is the paper's (shared/docs/study-protocols.md, "Omniglot", tables and text).
#include <cmath>

#include "experiments/omniglot/grid.h"
#include "runtime/error.h"

namespace mn::exp::omniglot_grid {
namespace {

// The paper's default model (Section 4.1): Kumar's triplet loss, random triplets, full
// sharing, ReLU, no normalisation, no dropout. The triplet binary's defaults are the
// final model (the global loss), so every triplet row names its loss.
std::vector<std::string> kumar(std::vector<std::string> more = {}) {
  std::vector<std::string> f{"--loss", "kumar"};
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

GridRow row(std::string id, std::string group, std::string label, std::vector<std::string> flags,
            std::vector<std::string> differs, double val, std::vector<int> figures = {}) {
  GridRow r;
  r.id = std::move(id), r.group = std::move(group), r.label = std::move(label);
  r.flags = std::move(flags), r.differs = std::move(differs), r.paper_val = val, r.figures = std::move(figures);
  return r;
}
GridRow alias(std::string id, std::string group, std::string label, std::string of, double val,
              std::vector<int> figures = {}) {
  GridRow r;
  r.id = std::move(id), r.group = std::move(group), r.label = std::move(label), r.alias = std::move(of);
  r.paper_val = val, r.figures = std::move(figures);
  return r;
}

std::vector<GridRow> make_rows() {
  std::vector<GridRow> v;
  // ---- Table 1: the losses with random triplets (the Kumar row equals the default
  // model's 74.38, so the loss rows used random sampling: study-protocols.md,
  // ambiguity 1), and Kumar's loss with SSIM hard-positive mining.
  v.push_back(row("t1-hard-positive", "Table 1", "Hard positive mining", kumar({"--sampling", "hard-positive"}),
                  {"sampling"}, 77.1875, {5}));
  v.push_back(row("t1-kumar", "Table 1", "Kumar loss", kumar(), {}, 74.375, {3, 5, 6, 7}));
  v.push_back(row("t1-schroff", "Table 1", "Schroff loss", {"--loss", "schroff"}, {"loss"}, 75.0, {6}));
  v.push_back(row("t1-softmax", "Table 1", "Softmax loss", {"--loss", "softmax"}, {"loss"}, 7.8125, {6}));
  v.push_back(row("t1-global", "Table 1", "Global loss", {"--loss", "global"}, {"loss"}, 90.625, {6}));
  v.push_back(row("t1-global-triplet", "Table 1", "Global + triplet loss", {"--loss", "global-triplet"}, {"loss"},
                  90.625, {6}));
  for (size_t i = 0; i < v.size(); ++i) v[i].table_row = true;
  // ---- Table 2: the siamese baseline (Koch's net and head, its binary's defaults:
  // lr 6e-5 as the paper's earlier report) and the final triplet model (the default
  // with the global loss).
  GridRow siam = row("t2-siamese", "Table 2", "Siamese CNN", {}, {}, 87.8125);
  siam.siamese = true, siam.paper_eval = 84.50, siam.table_row = true;
  v.push_back(siam);
  GridRow fin = alias("t2-triplet", "Table 2", "Triplet CNN (final: global loss)", "t1-global", 90.3125);
  fin.paper_eval = 89.25, fin.table_row = true;
  v.push_back(fin);
  // ---- Section 4.1, activations (the default model, then with other losses and dropout).
  v.push_back(alias("act-relu", "Activations", "ReLU (default)", "t1-kumar", 74.375));
  v.push_back(row("act-selu", "Activations", "SELU", kumar({"--activation", "selu"}), {"activation"}, 75.0));
  v.push_back(row("act-elu", "Activations", "ELU", kumar({"--activation", "elu"}), {"activation"}, 76.25));
  v.push_back(alias("act-global-relu", "Activations", "ReLU, global loss", "t1-global", 90.625));
  v.push_back(row("act-global-elu", "Activations", "ELU, global loss", {"--loss", "global", "--activation", "elu"},
                  {"loss", "activation"}, 88.4375));
  v.push_back(alias("act-gt-relu", "Activations", "ReLU, global + triplet", "t1-global-triplet", 90.625));
  v.push_back(row("act-gt-elu", "Activations", "ELU, global + triplet",
                  {"--loss", "global-triplet", "--activation", "elu"}, {"loss", "activation"}, 87.1875));
  v.push_back(alias("act-dropout-relu", "Activations", "ReLU, dropout 0.1", "drop-0.1", 79.480));
  v.push_back(row("act-dropout-elu", "Activations", "ELU, dropout 0.1",
                  kumar({"--dropout", "0.1", "--activation", "elu"}), {"dropout", "activation"}, 76.256));
  // ---- Section 4.2, weight sharing (Figure 3), and Figure 4's 15-epoch runs.
  v.push_back(alias("share-full", "Weight sharing", "Full share", "t1-kumar", 74.375, {3}));
  v.push_back(row("share-disjoint", "Weight sharing", "Disjoint anchor", kumar({"--share", "disjoint-anchor"}),
                  {"share"}, 9.06, {3, 4}));
  GridRow dhp = row("share-disjoint-hp-15", "Weight sharing", "Disjoint anchor + hard positive, 15 epochs",
                    kumar({"--share", "disjoint-anchor", "--sampling", "hard-positive"}),
                    {"share", "sampling", "epochs"}, 73.44, {4});
  dhp.paper_epochs = 15;
  v.push_back(dhp);
  GridRow j15 = alias("share-joint-15", "Weight sharing", "Joint (full share), random, 15 epochs", "t1-kumar", 72.5);
  j15.paper_epochs = 15;
  v.push_back(j15);
  // ---- Section 4.3, sampling (Figure 5). The paper's "hard negative" is the semi-hard
  // negative of one random other class (SSIM); ssim-both mines both (no paper number).
  // The paper prints 74.38 and 77.18 here: the same 238/320 and 247/320 as Table 1's 74.375
  // and 77.1875, rounded. Every value is a multiple of 1/320 (study-protocols.md), so the
  // rounded prints are taken as those multiples: 74.38 beside 74.375 would break the
  // paper's ties (the normalisation ranking's tau: 0.64 instead of 0.74).
  v.push_back(alias("samp-random", "Sampling", "Random", "t1-kumar", 74.375, {5}));
  v.push_back(alias("samp-hard-positive", "Sampling", "Hard positive", "t1-hard-positive", 77.1875, {5}));
  v.push_back(row("samp-hard-negative", "Sampling", "Hard (semi-hard) negative",
                  kumar({"--sampling", "semi-hard-negative"}), {"sampling"}, 73.75, {5}));
  v.push_back(row("samp-ssim-both", "Sampling", "Hard positive + semi-hard negative (ours)",
                  kumar({"--sampling", "ssim-both"}), {"sampling"}, -1));
  // ---- Section 4.5, normalisation (Figure 7) and dropout.
  v.push_back(alias("norm-default", "Normalisation", "Default", "t1-kumar", 74.375, {7}));
  v.push_back(row("norm-input", "Normalisation", "Input norm", kumar({"--input-norm"}), {"input-norm"}, 73.44, {7}));
  v.push_back(row("norm-bn", "Normalisation", "BN after each pooling", kumar({"--batchnorm"}), {"batchnorm"}, 72.50,
                  {7}));
  v.push_back(row("norm-input-bn", "Normalisation", "Input norm + BN", kumar({"--input-norm", "--batchnorm"}),
                  {"input-norm", "batchnorm"}, 67.50, {7}));
  v.push_back(row("norm-lrn", "Normalisation", "LRN", kumar({"--lrn"}), {"lrn"}, 74.375, {7}));  // printed 74.38
  v.push_back(row("norm-lrn-input", "Normalisation", "LRN + input norm", kumar({"--lrn", "--input-norm"}),
                  {"lrn", "input-norm"}, 73.44, {7}));
  const std::pair<const char*, double> drops[] = {{"0.1", 79.06}, {"0.3", 77.19}, {"0.5", 76.88}, {"0.7", 66.25},
                                                  {"0.9", 50.94}};
  for (const auto& [p, val] : drops)
    v.push_back(row(std::string("drop-") + p, "Dropout", std::string("Dropout ") + p, kumar({"--dropout", p}),
                    {"dropout"}, val));
  v.push_back(row("drop-0.1-global", "Dropout", "Dropout 0.1, global loss", {"--loss", "global", "--dropout", "0.1"},
                  {"loss", "dropout"}, 88.75));
  v.push_back(row("drop-0.1-gt", "Dropout", "Dropout 0.1, global + triplet",
                  {"--loss", "global-triplet", "--dropout", "0.1"}, {"loss", "dropout"}, 90.0));
  return v;
}

std::vector<Scale> make_scales() {
  Scale full;
  full.name = "full";
  full.triplet_base = {"--preset", "full"};
  full.siamese_base = {"--preset", "full"};
  full.epochs = 50;
  full.description = "the paper's protocol: Koch's net (64/128/128/256 channels, dense 4096 + sigmoid) on 105x105 "
                     "images, 50 epochs x 500 iterations x 50 triplets, Adam lr 1e-4, validation every epoch on "
                     "10,000 triplets and 320 20-way tasks of the validation alphabets";
  // CPU scale, chosen on the validation alphabets only (2026-11-27 pilots, Kumar's loss,
  // random triplets, 8 epochs x 200 iterations x 50 triplets, Adam lr 1e-4; Lake's runs
  // were scored by the study but not looked at): the conv4 trunk with its batch-norm after
  // each convolution reached 55.3 % one-shot validation accuracy, without it 48.4 %;
  // the 28x28 conv4 trains at ~560 images/s on the 2-core VM against ~150 for Koch's net
  // at a quarter width on 105x105 (2026-11-21), whose demos stayed near 45-50 %. The
  // scale keeps the paper's procedure and changes the net, the image size and the length:
  // 10 epochs x 120 iterations x 50 triplets (60,000 triplets, 4.8 % of the paper's),
  // about 7 minutes a row here; validation each epoch on 2,000 triplets (the paper:
  // 10,000; they do not select the model) and the paper's 320 20-way tasks.
  Scale cpu;
  cpu.name = "cpu";
  const std::vector<std::string> common{"--preset", "full", "--trunk", "conv4", "--image-size", "28", "--embedding",
                                        "128", "--conv4-sigmoid", "--iters", "120", "--batch", "50", "--val-tasks",
                                        "320", "--val-triplets", "2000"};
  cpu.triplet_base = common;
  cpu.siamese_base = common;
  cpu.epochs = 10;
  cpu.iters = 120;
  cpu.val_triplets = 2000;
  cpu.description = "the paper's training procedure on 2 cores: the conv4 trunk (64 channels, batch-norm after each "
                    "convolution) on 28x28 images with Koch's head (dense 128 + sigmoid), 10 epochs x 120 "
                    "iterations x 50 triplets (4.8 % of the paper's triplets), Adam lr 1e-4, validation every epoch "
                    "on 2,000 triplets and 320 20-way tasks of the validation alphabets";
  // Paper-length scale (issue 52): the CPU scale's model and the paper's procedure and
  // length -- 50 epochs x 500 iterations x 50 triplets (1.25 M triplets, as the paper's
  // full scale), validation after every epoch on the paper's 10,000 validation triplets
  // and 320 20-way one-shot tasks, the best-validation model scored once on Lake's 400
  // trials. Only the net and the image size differ from the paper's protocol; about
  // 45-70 minutes a row on 2 cores (the dry run estimates each cell from measured steps).
  Scale pl = cpu;
  pl.name = "paper-length";
  for (std::vector<std::string>* base : {&pl.triplet_base, &pl.siamese_base})
    for (size_t i = 0; i + 1 < base->size(); ++i) {
      if ((*base)[i] == "--iters") (*base)[i + 1] = "500";
      if ((*base)[i] == "--val-triplets") (*base)[i + 1] = "10000";
    }
  pl.epochs = 50;
  pl.iters = 500;
  pl.val_triplets = 10000;
  pl.description = "the paper's procedure and length on 2 cores: the CPU scale's model (conv4, 64 channels, "
                   "batch-norm after each convolution, on 28x28 images, Koch's head: dense 128 + sigmoid), 50 "
                   "epochs x 500 iterations x 50 triplets (the paper's 1.25 M triplets), Adam at the paper's rates "
                   "(1e-4; the siamese baseline 6e-5) and L2 decays, validation every epoch on the paper's 10,000 "
                   "triplets and 320 20-way tasks of the validation alphabets, the best-validation model scored "
                   "once on Lake's 400 trials";
  return {full, cpu, pl};
}

}  // namespace

const std::vector<GridRow>& grid_rows() {
  static const std::vector<GridRow> rows = make_rows();
  return rows;
}

const GridRow& row_by_id(const std::string& id) {
  for (const GridRow& r : grid_rows())
    if (r.id == id) return r;
  MN_THROW("omniglot_grid: no row '", id, "'");
}

const GridRow& run_row(const GridRow& r) { return r.alias.empty() ? r : row_by_id(r.alias); }

const Scale& scale_by_name(const std::string& name) {
  static const std::vector<Scale> scales = make_scales();
  for (const Scale& s : scales)
    if (s.name == name) return s;
  MN_THROW("--scale ", name, ": expected cpu (2 cores, minutes a row), paper-length (the paper's length on the CPU "
           "scale's model, about an hour a row) or full (the paper's protocol, a GPU)");
}

int row_epochs(const GridRow& r, const Scale& s) {
  return std::max(1, static_cast<int>(std::lround(double(s.epochs) * r.paper_epochs / 50.0)));
}

std::vector<std::string> row_args(const GridRow& r0, const Scale& s) {
  const GridRow& r = run_row(r0);
  std::vector<std::string> a = r.siamese ? s.siamese_base : s.triplet_base;
  a.insert(a.end(), r.flags.begin(), r.flags.end());
  a.insert(a.end(), {"--epochs", std::to_string(row_epochs(r, s))});
  return a;
}

}  // namespace mn::exp::omniglot_grid
