// The Omniglot one-shot study driver (see omniglot_study.h).
#include "experiments/common/omniglot_study.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "autograd/ops.h"
#include "autograd/ops_layers.h"
#include "kernels/gemm_config.h"
#include "kernels/miners.h"
#include "data/image_io.h"
#include "data/lake_runs.h"
#include "data/omniglot.h"
#include "data/tasks.h"
#include "experiments/common/flags.h"
#include "experiments/common/metrics.h"
#include "experiments/common/progress.h"
#include "experiments/common/study_data.h"
#include "nn/checkpoint.h"
#include "nn/losses/losses.h"
#include "nn/models/koch.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/schedule.h"
#include "runtime/allocator.h"

namespace mn::exp {
namespace {

using ag::Variable;

// ------------------------------------------------------------------ flags --
void declare_flags(Flags& f, StudyKind kind) {
  bool tri = kind == StudyKind::Triplet;
  f.add_string("preset", "auto", "auto: the study's full protocol on a GPU, the CPU demo without one",
               {"auto", "full", "cpu-demo"});
  f.add_string("device", "auto", "auto, cpu, cuda or cuda:N");
  f.add_string("data-dir", "", "folder holding images_background/, images_evaluation/, all_runs/ "
               "(default: $MN_DATA_DIR, ./datasets or ../shared/datasets, subfolder omniglot)");
  f.add_string("out-dir", tri ? "runs/omniglot_triplet" : "runs/omniglot_siamese",
               "where metrics.jsonl, checkpoints, plots and summary.json go");
  f.add_string("cache-dir", "", "packed-image cache (default: data/'s default cache folder)");
  f.add_bool("resume", false, "continue from <out-dir>/last.safetensors (also from a mid-epoch stop)");
  f.add_double("time-limit", 0, "stop resumably before this many seconds of wall time have passed (0: none); "
               "the progress is saved and --resume continues exactly. Exit status 3");
  f.add_int("stop-after", 0, "stop resumably after this many training iterations in this run (0: none); "
            "exit status 3");
  f.add_string("evaluate", "", "only evaluate this checkpoint (Lake's runs, --test-dir)");
  f.add_string("test-dir", "", "also score N-way tasks drawn from this Omniglot-layout folder");
  f.add_int("test-tasks", 400, "number of N-way tasks drawn from --test-dir");
  f.add_int("test-way", 20, "N of the --test-dir tasks");
  f.add_int("seed", 1, "seed of initialisation, sampling and dropout");
  f.add_int("epochs", 50, "training epochs");
  f.add_int("iters", 500, "iterations per epoch");
  f.add_int("batch", 50, tri ? "triplets per iteration" : "pairs per iteration");
  if (tri) {
    f.add_string("loss", "global", "triplet loss", {"schroff", "kumar", "global", "global-triplet", "softmax"});
    f.add_double("margin", 0.01, "margin m of the Schroff / Kumar losses");
    f.add_double("global-l", 0.8, "global loss: weight l of the mean term");
    f.add_double("global-t", 0.4, "global loss: margin t");
    f.add_double("global-g", 1.0, "global + triplet: weight g of the Kumar term");
    f.add_string("share", "full", "weight sharing of the three branches", {"full", "disjoint-anchor"});
  }
  if (tri) {
    f.add_string("sampling", "random", "training triplets: random (the study); offline SSIM mining of "
                 "hard positives, semi-hard negatives or both; or online mining in P x K batches (P = batch, K = 3)",
                 {"random", "hard-positive", "semi-hard-negative", "ssim-both", "batch-hard", "online-semi-hard",
                  "online-random-negative"});
  } else {
    f.add_string("sampling", "random", "training pairs (from triplets): random, or offline SSIM mining",
                 {"random", "hard-positive", "semi-hard-negative", "ssim-both"});
  }
  f.add_string("activation", "relu", "activation of the convolutions", {"relu", "elu", "selu"});
  f.add_bool("input-norm", false, "scale inputs to [0, 1] (ink = 1) instead of raw 0..255 (ink = 255)");
  f.add_bool("lrn", false, "local response normalisation after each pooling layer");
  f.add_bool("batchnorm", false, "batch normalisation after each pooling layer");
  f.add_double("dropout", 0.0, "dropout rate after each pooling layer and before the dense layer");
  f.add_bool("augment", false, "Koch's random affine distortions of training images");
  f.add_string("optimizer", "adam", tri ? "adam (the study) or sgd" : "adam (the study's baseline) or sgd "
               "(Koch's layer-wise schedule: momentum ramp, lr x0.99 per epoch)", {"adam", "sgd"});
  f.add_double("lr", tri ? 1e-4 : 6e-5, "learning rate");
  f.add_double("conv-decay", 2e-4, "L2 weight decay of the convolutions");
  f.add_double("dense-decay", 1e-3, "L2 weight decay of the dense layer(s)");
  f.add_double("momentum", 0.9, "sgd: final momentum (ramped linearly from 0.5)");
  f.add_int("momentum-epochs", 10, "sgd: epochs of the momentum ramp");
  f.add_double("lr-decay", 0.99, "sgd: learning rate factor per epoch");
  const char* groups = tri ? "conv,dense" : "conv1,conv2,conv3,conv4,dense,head";
  f.add_string("group-lr", "", std::string("per-layer learning-rate multipliers, comma-separated, for the "
               "parameter groups ") + groups + " (Koch et al. tune one rate per layer; empty: all 1)");
  f.add_string("group-momentum", "", std::string("sgd: per-layer final momenta for ") + groups +
               " (empty: --momentum for all)");
  f.add_int("val-triplets", 10000, tri ? "verification triplets per validation" : "verification pairs per validation");
  f.add_int("val-tasks", 320, "one-shot validation tasks (an anchor and N candidates)");
  f.add_int("val-way", 20, "N of the validation tasks");
  f.add_int("train-max-drawer", 20, "train only on drawers 1..N (Koch et al.: 12)");
  f.add_double("width", 1.0, "channel multiplier of the Koch branch (1: 64/128/128/256)");
  f.add_int("embedding", 4096, "size of the dense embedding");
  f.add_bool("sigmoid-embedding", true, "sigmoid after the dense layer (Koch)");
  f.add_string("init", tri ? "study" : "koch", "initialisation: study (N(0,0.002) convs) or koch (N(0,0.01) convs)",
               {"study", "koch"});
  f.add_int("eval-batch", 200, "images per forward pass in evaluation");
  f.add_bool("tf32", false, "GPU: float32 convolutions and matrix products on TF32 tensor cores (inputs "
             "rounded to a 10-bit mantissa, as PyTorch's cuDNN default); also MN_ALLOW_TF32=1");
}

// The CPU demo: the same protocol and initialisation, scaled down (a quarter of
// the channels, a 512-d embedding, fewer and smaller iterations, a higher
// learning rate) to finish in a few minutes on 2 cores and visibly learn.
void apply_cpu_demo(Flags& f) {
  const std::pair<const char*, const char*> demo[] = {
      {"epochs", "6"},      {"iters", "80"},          {"batch", "16"},     {"width", "0.25"},
      {"embedding", "512"}, {"val-triplets", "1000"}, {"val-tasks", "100"}, {"lr", "3e-4"},
      {"test-tasks", "100"}};
  for (auto& [k, v] : demo)
    if (!f.user_set(k)) f.set(k, v, "cpu-demo preset");
}

// Architecture flags stored in checkpoints so --evaluate rebuilds the same model.
const char* kArchKeys[] = {"width", "embedding", "activation", "lrn", "batchnorm", "dropout",
                           "sigmoid-embedding", "share", "input-norm"};

std::string join_path(const std::string& a, const std::string& b) { return a.empty() ? b : a + "/" + b; }
bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}
void make_dirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    ::mkdir(cur.c_str(), 0755);
  }
  struct stat st;
  MN_CHECK(::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "--out-dir: cannot create '", path, "'");
}

kernels::Act parse_act(const std::string& s) {
  if (s == "elu") return kernels::Act::ELU;
  if (s == "selu") return kernels::Act::SELU;
  return kernels::Act::ReLU;
}

nn::TripletKind parse_loss(const std::string& s) {
  if (s == "schroff") return nn::TripletKind::Schroff;
  if (s == "kumar") return nn::TripletKind::Kumar;
  if (s == "global") return nn::TripletKind::Global;
  if (s == "global-triplet") return nn::TripletKind::GlobalTriplet;
  return nn::TripletKind::SoftmaxRatio;
}

// ------------------------------------------------------- resumable stops --
// SIGINT / SIGTERM ask the training loop to stop at the next iteration boundary
// and save its progress (a second signal kills as usual). Installed for the
// duration of train() only.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
  std::signal(sig, SIG_DFL);
  static const char msg[] = "\n[signal] stopping after the current step and saving the progress "
                            "(signal again to abort at once)\n";
  ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);  // async-signal-safe
  (void)ignored;
}
struct StopSignalGuard {
  using Handler = void (*)(int);
  Handler old_int, old_term;
  StopSignalGuard() {
    g_stop_signal = 0;
    old_int = std::signal(SIGINT, on_stop_signal);
    old_term = std::signal(SIGTERM, on_stop_signal);
  }
  ~StopSignalGuard() {
    std::signal(SIGINT, old_int);
    std::signal(SIGTERM, old_term);
  }
};

// Exit status of a run that stopped early and can be continued with --resume.
constexpr int kExitResumable = 3;

// Doubles in checkpoint metadata: 17 significant digits read back bit-exactly.
std::string exact_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
double md_double(const nn::Metadata& md, const std::string& key, double def) {
  auto it = md.find(key);
  return it == md.end() ? def : std::stod(it->second);
}

// Running sums of one epoch's training statistics (saved in mid-epoch checkpoints).
struct EpochSums {
  double loss = 0, active = 0, dpos = 0, dneg = 0, train_s = 0;
};

// ------------------------------------------------------------- the study --
struct Study {
  StudyKind kind;
  Flags& f;
  Device device;
  std::string out;
  Generator init_gen, sample_gen;
  std::unique_ptr<nn::TripletNet> tnet;
  std::unique_ptr<nn::SiameseNet> snet;
  std::unique_ptr<nn::Optimizer> opt;
  std::unique_ptr<nn::ExponentialDecay> lr_sched;
  std::unique_ptr<nn::MomentumRamp> mom_sched;
  StudyData data;

  Study(StudyKind k, Flags& flags, Device d)
      : kind(k), f(flags), device(d), out(flags.str("out-dir")),
        init_gen(static_cast<uint64_t>(flags.i64("seed"))),
        sample_gen(static_cast<uint64_t>(flags.i64("seed")) * 7919 + 17),
        data(flags, d) {}

  nn::Module& model() { return tnet ? static_cast<nn::Module&>(*tnet) : static_cast<nn::Module&>(*snet); }
  nn::KochBranch& branch() { return tnet ? tnet->branch() : snet->branch(); }

  void build_model() {
    nn::KochBranchOptions o;
    o.width = f.f64("width");
    o.embedding = f.i64("embedding");
    o.activation = parse_act(f.str("activation"));
    o.lrn = f.flag("lrn");
    o.batchnorm = f.flag("batchnorm");
    o.dropout = f.f64("dropout");
    o.sigmoid_embedding = f.flag("sigmoid-embedding");
    o.init = f.str("init") == "koch" ? nn::KochInit::koch() : nn::KochInit::study();
    o.device = device;
    if (kind == StudyKind::Triplet) {
      auto share = f.str("share") == "full" ? nn::TripletShare::Full : nn::TripletShare::DisjointAnchor;
      tnet = std::make_unique<nn::TripletNet>(o, share, init_gen);
    } else {
      snet = std::make_unique<nn::SiameseNet>(o, init_gen);
    }
    std::vector<nn::ParamGroup> groups;
    double lr = f.f64("lr");
    if (tnet) {
      groups = tnet->param_groups(lr, f.f64("conv-decay"), f.f64("dense-decay"));
    } else {
      double cd = f.f64("conv-decay"), dd = f.f64("dense-decay");
      groups = snet->param_groups(lr, f.f64("momentum"), {cd, cd, cd, cd, dd, dd});
    }
    std::vector<double> lr_mult = per_group("group-lr", groups.size(), 1.0);
    std::vector<double> moms = per_group("group-momentum", groups.size(), f.f64("momentum"));
    for (size_t i = 0; i < groups.size(); ++i) groups[i].lr *= lr_mult[i];
    if (f.str("optimizer") == "adam") {
      for (auto& g : groups) g.momentum = 0;
      opt = std::make_unique<nn::Adam>(groups);
    } else {
      for (size_t i = 0; i < groups.size(); ++i) groups[i].momentum = moms[i];
      opt = std::make_unique<nn::SGD>(groups);
      lr_sched = std::make_unique<nn::ExponentialDecay>(*opt, f.f64("lr-decay"));
      mom_sched = std::make_unique<nn::MomentumRamp>(*opt, 0.5, f.i64("momentum-epochs"));
    }
  }

  // A comma-separated list flag with one value per parameter group (empty: `def` for all).
  std::vector<double> per_group(const std::string& key, size_t n, double def) const {
    std::vector<double> out;
    std::stringstream ss(f.str(key));
    std::string item;
    while (std::getline(ss, item, ',')) {
      char* end = nullptr;
      double v = std::strtod(item.c_str(), &end);
      MN_CHECK(!item.empty() && *end == '\0' && std::isfinite(v), "--", key, ": '", item, "' is not a number");
      out.push_back(v);
    }
    if (out.empty()) return std::vector<double>(n, def);
    MN_CHECK(out.size() == n, "--", key, ": expected ", n, " comma-separated values (one per parameter group), got ",
             out.size());
    return out;
  }

  nn::Metadata metadata(int64_t epoch, double best, int64_t best_epoch) {
    nn::Metadata md;
    md["epoch"] = std::to_string(epoch);
    md["best_val_one_shot"] = json_number(best);
    md["best_epoch"] = std::to_string(best_epoch);
    md["study"] = kind == StudyKind::Triplet ? "omniglot_triplet" : "omniglot_siamese";
    md["config"] = f.to_json();
    for (const char* k : kArchKeys)
      if (k != std::string("share") || tnet) md[std::string("arch.") + k] = flag_text(k);
    nn::put_generator_state(md, "rng.sample", sample_gen);
    nn::put_generator_state(md, "rng.loader", Generator(data.loader_seed(), data.loader_offset()));
    nn::put_generator_state(md, "rng.dropout", branch().dropout_generator());
    return md;
  }

  std::string flag_text(const std::string& k) {
    std::string cfg = f.to_config();
    std::stringstream ss(cfg);
    std::string line;
    while (std::getline(ss, line))
      if (line.rfind(k + " = ", 0) == 0) return line.substr(k.size() + 3);
    return "";
  }

  // ---------------------------------------------------------- training step --
  struct StepStats {
    double loss = 0, active = 0, dpos = 0, dneg = 0;
  };

  nn::TripletLossOptions loss_options() const {
    nn::TripletLossOptions lo;
    lo.kind = parse_loss(f.str("loss"));
    lo.margin = f.f64("margin");
    lo.global_l = f.f64("global-l");
    lo.global_t = f.f64("global-t");
    lo.global_g = f.f64("global-g");
    return lo;
  }

  StepStats train_step() {
    int64_t B = f.i64("batch");
    StepStats s;
    nn::LossOutput out;
    if (tnet && data.online_mining()) {
      // P x K batch (3B images, as many as B random triplets), mined on the device
      // from the detached squared distances of the batch's embeddings.
      PKBatch pk = data.pk_batch(B, 3, sample_gen);
      Variable e = tnet->embed_candidate(Variable(pk.images));
      kernels::MinerParams mp;
      const std::string smp = f.str("sampling");
      mp.kind = smp == "batch-hard" ? kernels::MinerKind::BatchHard
                : smp == "online-semi-hard" ? kernels::MinerKind::SemiHard
                                            : kernels::MinerKind::RandomViolating;
      mp.margin = f.f64("margin");
      mp.fallback = kernels::SemiHardFallback::Hardest;
      Tensor dist = kernels::pairwise_distance_matrix(e.data(), true);
      kernels::MinedTriplets mined = kernels::mine_triplets(dist, pk.labels, mp, &sample_gen);
      if (mined.triplets.size(0) == 0) return {0, 0, 0, 0};  // nothing violates: no update
      out = nn::triplet_loss(e, mined.triplets, loss_options());
      out.loss.backward();
      auto h = out.host_stats();
      s = {h.loss, h.active / static_cast<double>(mined.triplets.size(0)), h.mean_pos, h.mean_neg};
    } else if (tnet) {
      TripletBatch tb = data.triplet_batch();
      auto e = tnet->embed_triplets(Variable(tb.anchors), Variable(tb.positives), Variable(tb.negatives));
      out = nn::triplet_loss(e[0], e[1], e[2], loss_options());
      out.loss.backward();
      auto h = out.host_stats();
      s = {h.loss, h.active / static_cast<double>(B), h.mean_pos, h.mean_neg};
    } else {
      PairBatch pb = data.pair_batch(B);
      auto e = snet->embed_pairs(Variable(pb.left), Variable(pb.right));
      out = nn::koch_siamese_loss(e[0], e[1], snet->head_weight(), snet->head_bias(), pb.target);
      out.loss.backward();
      auto h = out.host_stats();
      s = {h.loss, h.active / static_cast<double>(B), h.mean_pos, h.mean_neg};
    }
    opt->step();
    opt->zero_grad();
    return s;
  }

  // ------------------------------------------------------------ evaluation --
  // (Q, H, W) x (C, H, W) uint8 -> (Q, C): distances (triplet) or similarities (siamese).
  Tensor score_matrix(const Tensor& queries, const Tensor& candidates) {
    ag::NoGradGuard ng;
    model().eval();
    Tensor qi = data.to_input(queries), ci = data.to_input(candidates);
    Tensor out;
    if (tnet) {
      Variable eq = embed_chunked(qi, true), ec = embed_chunked(ci, false);
      out = ag::pairwise_distance(eq, ec, kernels::Pairwise::Euclidean).data();
    } else {
      Variable eq = embed_chunked(qi, false), ec = embed_chunked(ci, false);
      int64_t Q = eq.size(0), C = ec.size(0);
      // Every (query, candidate) pair through the head: broadcast to (Q*C, E).
      Variable a = ag::reshape(ag::expand(ag::unsqueeze(eq, 1), {Q, C, eq.size(1)}), {Q * C, eq.size(1)});
      Variable b = ag::reshape(ag::expand(ag::unsqueeze(ec, 0), {Q, C, ec.size(1)}), {Q * C, ec.size(1)});
      out = ag::reshape(snet->logits(a, b), {Q, C}).data();
    }
    model().train();
    return out;
  }

  Variable embed_chunked(const Tensor& x, bool anchor) {
    int64_t n = x.size(0), step = f.i64("eval-batch");
    std::vector<Variable> parts;
    for (int64_t i = 0; i < n; i += step) {
      Variable xi(x.narrow(0, i, std::min(step, n - i)));
      parts.push_back(tnet ? (anchor ? tnet->embed_anchor(xi) : tnet->embed_candidate(xi)) : snet->embed(xi));
    }
    return parts.size() == 1 ? parts[0] : ag::concat(parts, 0);
  }

  data::ScoreKind score_kind() const { return tnet ? data::ScoreKind::Cost : data::ScoreKind::Similarity; }

  // Verification accuracy on the fixed validation triplets / pairs.
  double verification_accuracy() {
    ag::NoGradGuard ng;
    model().eval();
    double correct = 0;
    int64_t total = 0;
    const int64_t chunk = std::max<int64_t>(1, f.i64("eval-batch") / 3);
    if (tnet) {
      const auto& T = data.val_triplets();
      for (size_t i = 0; i < T.anchors.size(); i += chunk) {
        size_t n = std::min<size_t>(chunk, T.anchors.size() - i);
        auto slice = [&](const std::vector<int64_t>& v) {
          return data.val_input(std::vector<int64_t>(v.begin() + i, v.begin() + i + n));
        };
        Variable a(slice(T.anchors)), p(slice(T.positives)), q(slice(T.negatives));
        auto e = tnet->embed_triplets(a, p, q);
        auto dp = ag::l2_distance(e[0], e[1], true).data().to_double_vector();
        auto dn = ag::l2_distance(e[0], e[2], true).data().to_double_vector();
        for (size_t k = 0; k < n; ++k) correct += dp[k] < dn[k] ? 1.0 : (dp[k] == dn[k] ? 0.5 : 0.0);
        total += static_cast<int64_t>(n);
      }
    } else {
      const auto& P = data.val_pairs();
      for (size_t i = 0; i < P.left.size(); i += chunk) {
        size_t n = std::min<size_t>(chunk, P.left.size() - i);
        auto slice = [&](const std::vector<int64_t>& v) {
          return data.val_input(std::vector<int64_t>(v.begin() + i, v.begin() + i + n));
        };
        auto e = snet->embed_pairs(Variable(slice(P.left)), Variable(slice(P.right)));
        auto z = snet->logits(e[0], e[1]).data().to_double_vector();
        for (size_t k = 0; k < n; ++k) correct += ((z[k] > 0) == (P.genuine[i + k] != 0)) ? 1.0 : 0.0;
        total += static_cast<int64_t>(n);
      }
    }
    model().train();
    return total ? correct / total : 0.0;
  }

  data::OneShotResult one_shot_validation() {
    return data::evaluate_tasks(data.val_set(), data.val_tasks(),
                                [&](const Tensor& q, const Tensor& c) { return score_matrix(q, c); },
                                score_kind());
  }

  data::OneShotResult lake_test() {
    return data::evaluate_lake_runs_batched(data.lake_runs(),
                                            [&](const Tensor& q, const Tensor& c) { return score_matrix(q, c); },
                                            score_kind());
  }

  // N-way tasks from --test-dir (any Omniglot-layout folder).
  bool test_dir_eval(data::OneShotResult* r) {
    if (f.str("test-dir").empty()) return false;
    data::OmniglotLoadOptions lo;
    lo.cache_dir = data.cache_dir();
    data::ImageDataset ds = data::load_omniglot_set(f.str("test-dir"), lo);
    data::TaskOptions to;
    to.n_way = static_cast<int>(f.i64("test-way"));
    to.num_tasks = static_cast<int>(f.i64("test-tasks"));
    to.seed = 424242;
    to.kind = data::TaskKind::LakeKoch;
    auto tasks = data::make_one_shot_tasks(ds, to);
    *r = data::evaluate_tasks(ds, tasks, [&](const Tensor& q, const Tensor& c) { return score_matrix(q, c); },
                              score_kind());
    return true;
  }
};

JsonLine result_json(const data::OneShotResult& r) {
  std::string per = "[";
  for (size_t i = 0; i < r.group_error_percent.size(); ++i)
    per += (i ? ", " : "") + json_number(100.0 - r.group_error_percent[i]);
  per += "]";
  JsonLine j;
  j.num("accuracy_percent", 100.0 - r.error_percent).integer("trials", r.trials).integer("ties", r.ties).raw(
      "per_group_accuracy_percent", per);
  return j;
}

void print_result(const char* what, const data::OneShotResult& r) {
  std::printf("%s: %.2f %% one-shot accuracy (%lld trials, %.2f %% error)\n", what, 100.0 - r.error_percent,
              static_cast<long long>(r.trials), r.error_percent);
}

int evaluate_only(Study& st) {
  nn::SafetensorsFile meta = nn::read_safetensors(st.f.str("evaluate"));
  for (const char* k : kArchKeys) {
    auto it = meta.metadata.find(std::string("arch.") + k);
    if (it != meta.metadata.end() && !st.f.user_set(k)) st.f.set(k, it->second, "checkpoint");
  }
  st.build_model();
  nn::load_checkpoint(st.f.str("evaluate"), st.model(), nullptr);
  std::printf("evaluating %s on %s\n", st.f.str("evaluate").c_str(), device_name(st.device).c_str());
  JsonLine summary;
  summary.str("checkpoint", st.f.str("evaluate")).str("device", device_name(st.device));
  if (!st.data.lake_dir().empty()) {
    auto r = st.lake_test();
    print_result("Lake's 400 trials", r);
    summary.raw("lake", result_json(r).dump());
  }
  data::OneShotResult tr;
  if (st.test_dir_eval(&tr)) {
    print_result(("--test-dir " + st.f.str("test-dir")).c_str(), tr);
    summary.raw("test_dir", result_json(tr).dump());
  }
  make_dirs(st.out);
  write_file_atomic(join_path(st.out, "evaluation.json"), summary.dump() + "\n");
  return 0;
}

int train(Study& st) {
  Flags& f = st.f;
  make_dirs(st.out);
  st.build_model();
  const std::string last = join_path(st.out, "last.safetensors"), best_path = join_path(st.out, "best.safetensors");
  // Progress so far: `start_epoch` epochs complete, then `start_iter` iterations
  // of the next one (a mid-epoch stop) with their running sums.
  int64_t start_epoch = 0, start_iter = 0, best_epoch = -1;
  double best = -1, total_train_s = 0, last_val_s = 0;
  EpochSums partial;
  uint64_t loader_seed = static_cast<uint64_t>(f.i64("seed")) * 104729 + 3, loader_offset = 0;
  if (f.flag("resume")) {
    MN_CHECK(file_exists(last), "--resume: no checkpoint at '", last, "'");
    nn::Metadata md = nn::load_checkpoint(last, st.model(), st.opt.get());
    start_epoch = std::stoll(md.at("epoch"));
    start_iter = static_cast<int64_t>(md_double(md, "iter", 0));
    best = std::stod(md.at("best_val_one_shot"));
    best_epoch = std::stoll(md.at("best_epoch"));
    partial = {md_double(md, "partial.loss", 0), md_double(md, "partial.active", 0),
               md_double(md, "partial.d_pos", 0), md_double(md, "partial.d_neg", 0),
               md_double(md, "partial.train_seconds", 0)};
    total_train_s = md_double(md, "train_seconds_total", 0);
    last_val_s = md_double(md, "last_val_seconds", 0);
    nn::get_generator_state(md, "rng.sample", st.sample_gen);
    nn::get_generator_state(md, "rng.dropout", st.branch().dropout_generator());
    Generator lg;
    nn::get_generator_state(md, "rng.loader", lg);
    loader_seed = lg.seed();
    loader_offset = lg.offset();
    std::printf("resuming after epoch %lld%s from %s\n", static_cast<long long>(start_epoch),
                start_iter ? (" and " + std::to_string(start_iter) + " iterations of the next").c_str() : "",
                last.c_str());
  }
  if (!(st.tnet && st.data.online_mining()))
    st.data.start_loader(st.tnet ? f.i64("batch") : f.i64("batch") / 2, loader_seed, loader_offset);
  write_file_atomic(join_path(st.out, "config.txt"), f.to_config());
  MetricsLog log(join_path(st.out, "metrics.jsonl"), f.flag("resume") ? static_cast<int>(start_epoch) : 0);
  if (!f.flag("resume")) write_file_atomic(log.path(), "");

  const int64_t epochs = f.i64("epochs"), iters = f.i64("iters"), B = f.i64("batch");
  const int64_t imgs_per_iter = st.tnet ? 3 * B : 3 * (B / 2);
  MN_CHECK(start_iter <= iters, "--resume: the checkpoint stopped at iteration ", start_iter, " of an epoch, but "
           "--iters is ", iters, " (resume with the run's own flags: see ", join_path(st.out, "config.txt"), ")");
  std::vector<Series> curves(2);
  curves[0].title = "validation one-shot accuracy (%)";
  curves[1].title = "training loss";
  curves[1].right_axis = true;
  {  // the curves so far (after a resume)
    std::ifstream in(log.path());
    std::string line;
    while (std::getline(in, line)) {
      auto num = [&](const std::string& key) {
        size_t p = line.find("\"" + key + "\": ");
        return p == std::string::npos ? NAN : std::atof(line.c_str() + p + key.size() + 4);
      };
      curves[0].x.push_back(num("epoch"));
      curves[0].y.push_back(num("val_one_shot_percent"));
      curves[1].x.push_back(num("epoch"));
      curves[1].y.push_back(num("train_loss"));
    }
  }

  // Resumable stops: a signal, --stop-after iterations, or --time-limit (checked
  // before each iteration and before each validation against their measured cost
  // plus the cost of writing the checkpoint).
  auto signals = std::make_unique<StopSignalGuard>();
  const auto run_start = std::chrono::steady_clock::now();
  auto run_seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  };
  const double time_limit = f.f64("time-limit");
  const int64_t stop_after = f.i64("stop-after");
  MN_CHECK(time_limit >= 0 && stop_after >= 0, "--time-limit and --stop-after must be >= 0");
  int64_t iters_this_run = 0;
  double iter_s = 0, save_s = 1.0;  // running estimates (save: until measured)
  auto stop_reason = [&](bool before_iteration, double next_cost) -> std::string {
    if (g_stop_signal) return g_stop_signal == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)";
    if (before_iteration && stop_after > 0 && iters_this_run >= stop_after)
      return "--stop-after " + std::to_string(stop_after) + " iterations";
    if (time_limit > 0 && run_seconds() + next_cost + save_s > time_limit)
      return "--time-limit " + json_number(time_limit) + " s";
    return "";
  };
  // Checkpoint metadata after `epochs_done` epochs and `done` iterations of the next.
  auto progress_metadata = [&](int64_t epochs_done, int64_t done, const EpochSums& sums) {
    nn::Metadata md = st.metadata(epochs_done, best, best_epoch);
    md["iter"] = std::to_string(done);
    md["partial.loss"] = exact_text(sums.loss);
    md["partial.active"] = exact_text(sums.active);
    md["partial.d_pos"] = exact_text(sums.dpos);
    md["partial.d_neg"] = exact_text(sums.dneg);
    md["partial.train_seconds"] = exact_text(sums.train_s);
    md["train_seconds_total"] = exact_text(total_train_s);
    md["last_val_seconds"] = exact_text(last_val_s);
    return md;
  };
  auto stop_now = [&](int64_t epoch, int64_t done, const EpochSums& sums, const std::string& why) {
    nn::save_checkpoint(last, st.model(), st.opt.get(), progress_metadata(epoch - 1, done, sums));
    std::printf("\nstopped: %s, at epoch %lld after %lld of %lld iterations%s. The progress is saved in %s; "
                "continue with the same command and --resume.\n", why.c_str(), static_cast<long long>(epoch),
                static_cast<long long>(done), static_cast<long long>(iters),
                done == iters ? " (validation pending)" : "", last.c_str());
    std::fflush(stdout);
    return kExitResumable;
  };

  for (int64_t epoch = start_epoch + 1; epoch <= epochs; ++epoch) {
    if (st.lr_sched) st.lr_sched->apply(epoch - 1);
    if (st.mom_sched) st.mom_sched->apply(epoch - 1);
    const bool resumed_epoch = epoch == start_epoch + 1;
    const int64_t first_it = resumed_epoch ? start_iter + 1 : 1;
    EpochSums sums = resumed_epoch ? partial : EpochSums{};
    Progress bar("epoch " + std::to_string(epoch) + "/" + std::to_string(epochs), iters, first_it - 1);
    for (int64_t it = first_it; it <= iters; ++it) {
      std::string why = stop_reason(true, iter_s);
      if (!why.empty()) {
        const double s = bar.elapsed_seconds();
        sums.train_s += s;
        total_train_s += s;
        return stop_now(epoch, it - 1, sums, why);
      }
      auto s = st.train_step();
      if (!std::isfinite(s.loss)) {
        std::fprintf(stderr, "\nerror: the loss became %s at epoch %lld iteration %lld; stopping. The last good "
                     "checkpoint is %s (after epoch %lld).\n", std::isnan(s.loss) ? "NaN" : "infinite",
                     static_cast<long long>(epoch), static_cast<long long>(it), last.c_str(),
                     static_cast<long long>(epoch - 1));
        return 1;
      }
      ++iters_this_run;
      iter_s = bar.elapsed_seconds() / static_cast<double>(it - first_it + 1);
      sums.loss += s.loss;
      sums.active += s.active;
      sums.dpos += s.dpos;
      sums.dneg += s.dneg;
      bar.update(it, sums.loss / it, sums.active / it, imgs_per_iter);
    }
    bar.finish();
    const double seg_s = first_it <= iters ? bar.elapsed_seconds() : 0.0;
    sums.train_s += seg_s;
    total_train_s += seg_s;
    {
      std::string why = stop_reason(false, last_val_s);
      if (!why.empty()) return stop_now(epoch, iters, sums, why);
    }
    const double train_s = sums.train_s;
    Progress vt("validation", 1);
    double verif = st.verification_accuracy();
    data::OneShotResult os = st.one_shot_validation();
    double acc = 100.0 - os.error_percent;
    double val_s = vt.elapsed_seconds();
    last_val_s = val_s;
    bool improved = acc > best;
    if (improved) {
      best = acc;
      best_epoch = epoch;
    }
    JsonLine j;
    j.integer("epoch", epoch).num("train_loss", sums.loss / iters).num("active_share", sums.active / iters)
        .num(st.tnet ? "mean_d_pos" : "mean_weighted_l1_genuine", sums.dpos / iters)
        .num(st.tnet ? "mean_d_neg" : "mean_weighted_l1_impostor", sums.dneg / iters)
        .num("val_verification_percent", 100 * verif).num("val_one_shot_percent", acc).num("lr", st.opt->group(0).lr)
        .num("train_seconds", train_s).num("val_seconds", val_s).num("images_per_second", iters * imgs_per_iter / train_s);
    log.write(j);
    std::printf("epoch %lld: loss %.4f, active %.1f %%, %s %.4f, %s %.4f | validation: verification %.2f %%, "
                "one-shot %.2f %% (best %.2f %% at epoch %lld) | %.0f img/s\n",
                static_cast<long long>(epoch), sums.loss / iters, 100 * sums.active / iters,
                st.tnet ? "d+" : "wL1(genuine)", sums.dpos / iters, st.tnet ? "d-" : "wL1(impostor)",
                sums.dneg / iters, 100 * verif, acc, best, static_cast<long long>(best_epoch),
                iters * imgs_per_iter / train_s);
    std::fflush(stdout);
    const auto save_start = std::chrono::steady_clock::now();
    const nn::Metadata md = progress_metadata(epoch, 0, EpochSums{});
    nn::save_checkpoint(last, st.model(), st.opt.get(), md);
    if (improved) nn::save_checkpoint(best_path, st.model(), nullptr, md);
    save_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - save_start).count();
    curves[0].x.push_back(epoch);
    curves[0].y.push_back(acc);
    curves[1].x.push_back(epoch);
    curves[1].y.push_back(sums.loss / iters);
    plot_png(join_path(st.out, "learning_curve.png"), std::string(st.tnet ? "triplet" : "siamese") +
             " CNN on Omniglot", "epoch", "one-shot validation accuracy (%)", "training loss", curves);
  }
  signals.reset();  // the final test below is not resumable piecewise: signals act as usual
  if (g_stop_signal) {
    std::printf("\nstopped by a signal after the last epoch; %s holds the trained model: --resume runs the final "
                "test.\n", last.c_str());
    return kExitResumable;
  }
  const int64_t total_images = epochs * iters * imgs_per_iter;  // over every segment of a resumed run

  // Final test with the model selected on validation.
  JsonLine summary;
  summary.str("study", st.tnet ? "omniglot_triplet" : "omniglot_siamese").str("device", device_name(st.device))
      .raw("config", f.to_json()).num("best_val_one_shot_percent", best).integer("best_epoch", best_epoch)
      .num("train_seconds", total_train_s).num("train_images_per_second", total_train_s > 0 ? total_images / total_train_s : 0);
  if (file_exists(best_path)) nn::load_checkpoint(best_path, st.model(), nullptr);
  if (!st.data.lake_dir().empty()) {
    auto r = st.lake_test();
    print_result("Lake's 400 trials (best validation model)", r);
    summary.raw("lake", result_json(r).dump());
  } else {
    std::printf("Lake's runs not found: no final test\n");
  }
  data::OneShotResult tr;
  if (st.test_dir_eval(&tr)) {
    print_result(("--test-dir " + f.str("test-dir")).c_str(), tr);
    summary.raw("test_dir", result_json(tr).dump());
  }
  write_file_atomic(join_path(st.out, "summary.json"), summary.dump() + "\n");
  std::printf("outputs in %s: metrics.jsonl, learning_curve.png, last/best.safetensors, summary.json\n",
              st.out.c_str());
  return 0;
}

}  // namespace

int run_omniglot_study(StudyKind kind, int argc, char** argv) {
  const char* prog = kind == StudyKind::Triplet ? "omniglot_triplet" : "omniglot_siamese";
  Flags f(prog, kind == StudyKind::Triplet
                    ? "Triplet CNN with Koch-style branches on Omniglot one-shot (defaults = the study's final model)."
                    : "Koch et al.'s siamese CNN on Omniglot one-shot (the study's baseline).");
  declare_flags(f, kind);
  try {
    if (!f.parse(argc, argv)) return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    return 2;
  }
  try {
    std::string ds = f.str("device");
    Device device = ds == "auto" ? (cuda_available() ? Device::cuda(0) : Device::cpu()) : parse_device(ds);
    if (device.is_cuda())
      MN_CHECK(cuda_available(), "--device ", ds, ": no CUDA device is available (", cuda_compiled() ?
               "no GPU or driver found" : "this build has no CUDA", ")");
    std::string preset = f.str("preset");
    if (preset == "cpu-demo" || (preset == "auto" && device.is_cpu() && f.str("evaluate").empty())) {
      apply_cpu_demo(f);
      std::printf("== CPU demo preset: a scaled-down run (width %.2f, %lld epochs x %lld iterations of %lld) that "
                  "finishes in minutes on 2 cores.\n== The study's full protocol needs a GPU: run on a CUDA "
                  "machine (--device auto picks it) or pass --preset full.\n",
                  f.f64("width"), static_cast<long long>(f.i64("epochs")), static_cast<long long>(f.i64("iters")),
                  static_cast<long long>(f.i64("batch")));
    }
    if (f.user_set("tf32")) kernels::set_allow_tf32(f.flag("tf32"));
    else if (kernels::allow_tf32()) f.set("tf32", "true", "MN_ALLOW_TF32");  // config.txt says what ran
    std::printf("%s on %s%s\n", prog, device_name(device).c_str(),
                device.is_cuda() && kernels::allow_tf32() ? " (TF32 tensor cores on)" : "");
    Study st(kind, f, device);
    if (!f.str("evaluate").empty()) return evaluate_only(st);
    return train(st);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", prog, e.what());
    return 1;
  }
}

}  // namespace mn::exp
