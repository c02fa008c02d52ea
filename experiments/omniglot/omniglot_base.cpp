// The shared part of the Omniglot studies (see omniglot_base.h).
#include "experiments/omniglot/omniglot_base.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>

#include "autograd/ops.h"
#include "data/dataset.h"
#include "kernels/elementwise.h"
#include "experiments/omniglot/names.h"
#include "experiments/omniglot/omniglot_study.h"
#include "nn/registry.h"
#include "runtime/error.h"

namespace mn::exp {

namespace {
// The stats' first four entries as a fresh float64 tensor on their device.
Tensor stats_head_f64(const Tensor& stats, size_t names) {
  MN_CHECK(stats.numel() >= 4 && names == 4, "loss_device_stats: ", stats.numel(), " stats for ", names, " names");
  Tensor head = stats.contiguous().view({stats.numel()}).narrow(0, 0, 4);
  return head.dtype() == DType::F64 ? head.clone() : head.to(DType::F64);
}
}  // namespace

DeviceStats loss_device_stats(const Tensor& stats, double n, std::vector<std::string> names) {
  Tensor v = stats_head_f64(stats, names.size());
  Tensor active = v.narrow(0, 1, 1);
  active.copy_(kernels::mul_scalar(active, n > 0 ? 1.0 / n : 0.0));  // on the device
  return {std::move(names), v};
}

DeviceStats loss_device_stats(const Tensor& stats, const Tensor& n, std::vector<std::string> names) {
  Tensor v = stats_head_f64(stats, names.size());
  Tensor active = v.narrow(0, 1, 1);
  // active / max(n, 1): the active count is 0 whenever n is.
  Tensor denom = kernels::clamp(n.contiguous().view({1}).to(DType::F64), 1.0, 1e300);
  active.copy_(kernels::div(active, denom));
  return {std::move(names), v};
}

// ------------------------------------------------------------------ flags --
// --help shows what a run needs; --help-all the paper's ablations, evaluation and run control too.
static void set_help_sections(Flags& f) {
  f.set_help_groups({
      {"core", true, {"preset", "data-dir", "loss", "sampling", "epochs", "iters", "batch", "device", "seed",
                      "out-dir", "resume", "time-limit", "evaluate", "members"}},
      {"model and training", true, {"trunk", "width", "channels", "embedding", "image-size", "conv4-bn",
                                    "conv4-sigmoid", "sigmoid-embedding", "optimizer", "lr", "lr-schedule", "margin",
                                    "per-class", "pk-alphabet", "rotations", "augment", "init"}},
      {"the study's ablations (the paper's Sections 4.1-4.5 and its loss parameters)", false,
       {"activation", "input-norm", "lrn", "batchnorm", "dropout", "share", "conv-decay", "dense-decay", "global-l",
        "global-t", "global-g", "ms-alpha", "ms-beta", "ms-base", "ms-epsilon", "train-max-drawer", "momentum",
        "momentum-epochs", "lr-decay", "lr-step-epochs", "group-lr", "group-momentum"}},
      {"evaluation", false, {"val-triplets", "val-tasks", "val-way", "test-dir", "test-tasks", "test-way", "test-seed",
                             "tta", "tta-scale", "ensemble", "eval-batch", "eval-distance", "export-weights"}},
      {"run control and legacy", false, {"cache-dir", "stop-after", "log-every", "cuda-graph", "precision", "tf32",
                                         "deterministic", "mine-locally", "sync-bn", "collective-timeout",
                                         "config"}},
  });
}

void OmniglotStudy::declare_flags(Flags& f) {
  const bool tri = name() == "omniglot_triplet";
  f.add_string("preset", "auto", tri ? "auto: the study's full protocol on a GPU, the CPU demo without one; "
               "cpu-demo: conv4 on 28x28 images, about 5 minutes on 2 cores; cpu-hour: an ensemble of 10 cpu-demo "
               "runs (--members 10), under an hour; cpu-4h: an ensemble of 8 conv4 runs of 70 x 250 steps "
               "with augmentation, scored with 8 views of every image (--tta 8), under 4 hours"
               : "auto: the study's full protocol on a GPU, the CPU demo without one", {"auto", "full", "cpu-demo",
               "cpu-hour", "cpu-4h"});
  f.add_string("data-dir", "", "folder holding images_background/, images_evaluation/, all_runs/ "
               "(default: $MN_DATA_DIR, ./datasets or ../shared/datasets, subfolder omniglot)");
  f.add_string("cache-dir", "", "packed-image cache (default: data/'s default cache folder)");
  f.add_string("test-dir", "", "also score N-way tasks drawn from this Omniglot-layout folder");
  f.add_int("test-tasks", 400, "number of N-way tasks drawn from --test-dir", 1, INT_MAX);
  f.add_int("test-way", 20, "N of the --test-dir tasks", 2, INT_MAX);
  f.add_int("test-seed", 424242, "seed of the --test-dir tasks (which characters, drawers and images)", 0);
  f.add_int("tta", 1, "test-time augmentation of the final test (Lake's trials, --test-dir): N views of every query "
            "and candidate image, the image itself and N-1 fixed draws of Koch's affine distortions (the same in "
            "every run), scored through the mean embedding (triplet) or as the mean score (siamese); the summary "
            "also gives the validation one-shot accuracy with the N views beside the plain one (per-epoch "
            "validation stays plain); 1: off", 1, 64);
  f.add_double("tta-scale", 0.5, "--tta: the distortions' ranges as a fraction of Koch's (1: rotation 10 deg, shear "
               "0.3, scale 0.8-1.2, translation 2 px at 105x105)", 0.0, 1.0);
  f.add_string("ensemble", "", "checkpoints (comma-separated) of networks with this one's architecture: the final "
               "test (Lake's trials, --test-dir, and with --evaluate) scores with the mean of their scores and this "
               "network's; the summary also gives the validation one-shot accuracy of this network alone and of the "
               "ensemble; empty: this network alone");
  f.add_int("members", 1, "train an ensemble: N networks one after another, each a whole run of this "
            "configuration with --seed, --seed + 1000, ... in OUT/member-K/, then the final test scored by all of them "
            "(the mean score, as --ensemble) into OUT/ with a table in OUT/report.md; --resume continues it and "
            "--time-limit spans it", 1, 64);
  f.add_int("iters", 500, "iterations per epoch", 1, INT_MAX);
  f.add_int("batch", 50, tri ? "triplets per iteration" : "pairs per iteration (even)", tri ? 1 : 2, 1 << 20);
  declare_kind_flags(f);
  f.add_string("trunk", "koch", "the branch network: koch (the study's) or conv4 (4 x [conv 3x3, batch-norm, "
               "activation, max-pool 2], the few-shot literature's trunk; --activation, --lrn, --batchnorm, "
               "--dropout and --sigmoid-embedding mean the same on both; --width and --init are Koch's only)",
               {"koch", "conv4"});
  f.add_int("channels", 64, "conv4: channels of every block", 1, 4096);
  f.add_bool("conv4-bn", true, "conv4: batch normalisation after each convolution (the trunk's standard form; "
             "--batchnorm adds the study's after each pooling layer)");
  f.add_bool("conv4-sigmoid", false, "conv4: a sigmoid after the dense embedding (the Koch branch's head; needs "
             "--embedding N; --sigmoid-embedding is the Koch branch's own switch)");
  f.add_string("activation", "relu", "activation of the convolutions (registered activations)", activation_names());
  f.add_bool("input-norm", false, "scale inputs to [0, 1] (ink = 1) instead of raw 0..255 (ink = 255)");
  f.add_bool("lrn", false, "local response normalisation after each pooling layer");
  f.add_bool("batchnorm", false, "batch normalisation after each pooling layer");
  f.add_bool("sync-bn", false, "data-parallel runs (mpirun -np N): batch normalisation with the statistics of the "
             "global batch (every rank's rows; PyTorch's SyncBatchNorm) instead of each rank's own rows; 2 ranks then "
             "train like one process on the whole batch");
  f.add_double("dropout", 0.0, "dropout rate after each pooling layer and before the dense layer", 0.0, 0.99);
  f.add_bool("augment", false, "Koch's random affine distortions of training images");
  f.add_string("optimizer", "adam", tri ? "adam (the study) or sgd" : "adam (the study's baseline) or sgd "
               "(Koch's layer-wise schedule: momentum ramp, lr x0.99 per epoch); any registered optimizer",
               optimizer_names());
  f.add_double("lr", tri ? 1e-4 : 6e-5, "learning rate", 0.0);
  f.add_double("conv-decay", 2e-4, "L2 weight decay of the convolutions", 0.0);
  f.add_double("dense-decay", 1e-3, "L2 weight decay of the dense layer(s)", 0.0);
  f.add_double("momentum", 0.9, "sgd: final momentum (ramped linearly from 0.5)", 0.0, 0.999);
  f.add_int("momentum-epochs", 10, "sgd: epochs of the momentum ramp", 0, 1000000);
  f.add_double("lr-decay", 0.99, "learning rate factor gamma of the exponential and step schedules", 1e-6, 1.0);
  std::vector<std::string> schedules{"auto"};
  for (const auto& n : nn::schedule_registry().names()) schedules.push_back(n);
  f.add_string("lr-schedule", "auto", "learning-rate schedule: auto (exponential, x --lr-decay per epoch, with "
               "sgd as Koch; constant with adam/adamw as the study) or a registered schedule (cosine: from the lr to "
               "near 0 over --epochs, so a --resume that changes --epochs re-spans it)", schedules);
  f.add_int("lr-step-epochs", 8, "step schedule: epochs between decays", 1, 1000000);
  const char* groups = tri ? "conv,dense (conv4 without --embedding: conv)"
                           : "conv1,conv2,conv3,conv4,dense,head (conv4: conv,dense,head; without --embedding: conv,head)";
  f.add_string("group-lr", "", std::string("per-layer learning-rate multipliers, comma-separated, for the "
               "parameter groups ") + groups + " (Koch et al. tune one rate per layer; empty: all 1)");
  f.add_string("group-momentum", "", std::string("sgd: per-layer final momenta for ") + groups +
               " (empty: --momentum for all)");
  f.add_int("val-triplets", 10000, tri ? "verification triplets per validation" : "verification pairs per validation",
            1, INT_MAX);
  f.add_int("val-tasks", 320, "one-shot validation tasks (an anchor and N candidates)", 1, INT_MAX);
  f.add_int("val-way", 20, "N of the validation tasks", 2, INT_MAX);
  f.add_int("image-size", 105, "input side in pixels: the 105x105 images are area-averaged down to it once, "
            "when the data is loaded (Lake's runs and --test-dir too)", 8, 105);
  f.add_bool("rotations", false, "add every training character rotated by 90, 180 and 270 degrees as new "
             "characters (4x the classes)");
  f.add_int("train-max-drawer", 20, "train only on drawers 1..N (Koch et al.: 12; at least 2: a positive pair "
            "needs two drawings of one character)", 2, 20);
  f.add_double("width", 1.0, "channel multiplier of the Koch branch (1: 64/128/128/256)", 0.01, 16.0);
  f.add_int("embedding", 0, "size of the dense embedding (0: the trunk's own: Koch 4096; conv4 no dense layer, "
            "the flattened features)", 0, 1 << 20);
  f.add_bool("sigmoid-embedding", true, "sigmoid after the dense layer (Koch)");
  f.add_string("init", tri ? "study" : "koch", "initialisation: study (N(0,0.002) convs) or koch (N(0,0.01) convs)",
               {"study", "koch"});
  f.add_int("eval-batch", 200, "images per forward pass in evaluation", 1, 1 << 20);
  set_help_sections(f);
}

// The CPU demo of the Koch net (the siamese binary's): the same protocol and
// initialisation, scaled down (a quarter of the channels, a 512-d embedding,
// fewer and smaller iterations, a higher learning rate) to finish in a few
// minutes on 2 cores and visibly learn. The triplet binary overrides it with
// its conv4 presets (triplet_study.cpp).
std::vector<std::pair<const char*, const char*>> OmniglotStudy::preset_values(const std::string& preset,
                                                                              const Flags&) const {
  if (preset != "cpu-demo") return {};
  return {{"epochs", "6"},      {"iters", "80"},          {"batch", "16"},     {"width", "0.25"},
          {"embedding", "512"}, {"val-triplets", "1000"}, {"val-tasks", "100"}, {"lr", "3e-4"},
          {"test-tasks", "100"}};
}

void OmniglotStudy::apply_presets(Flags& f, Device device, bool evaluating) {
  std::string preset = f.str("preset");
  if (preset == "auto" && device.is_cpu() && !evaluating) preset = "cpu-demo";
  if (preset == "auto" || preset == "full") return;
  const auto values = preset_values(preset, f);
  // Empty: a preset this study has not, or not for the --trunk the user chose
  // (the triplet binary's Koch net has only the base class's presets).
  MN_CHECK(!values.empty(), "--preset ", preset, ": ", name(),
           f.user_set("trunk") ? " with --trunk " + f.str("trunk") : std::string(),
           " has no such preset (its presets: auto, full and cpu-demo)");
  for (auto& [k, v] : values)  // never over a value the user or a resumed checkpoint set
    if (f.origin(k) == Flags::Origin::Default) f.set(k, v, Flags::Origin::Preset, preset + " preset");
  applied_preset_ = preset;
}

void OmniglotStudy::announce_presets(const Flags& f) const {
  if (applied_preset_.empty()) return;
  const std::string& preset = applied_preset_;
  if (f.str("trunk") == "conv4") {
    const std::string batches = f.declared("per-class")
        ? "P x K = " + std::to_string(f.i64("batch")) + " x " + std::to_string(f.i64("per-class")) +
              ", mined online (--sampling " + f.str("sampling") + ")"
        : std::to_string(f.i64("batch")) + " pairs, half genuine (--sampling " + f.str("sampling") + ")";
    std::printf("== %s preset: the conv4 trunk on %lldx%lld images, %lld epochs x %lld iterations of %s.\n== The "
                "study's own Koch net and protocol: --preset full (a GPU is advised).\n", preset.c_str(),
                static_cast<long long>(f.i64("image-size")), static_cast<long long>(f.i64("image-size")),
                static_cast<long long>(f.i64("epochs")), static_cast<long long>(f.i64("iters")), batches.c_str());
  } else {
    std::printf("== CPU demo preset: a scaled-down run (width %.2f, %lld epochs x %lld iterations of %lld) that "
                "finishes in minutes on 2 cores.\n== The study's full protocol needs a GPU: run on a CUDA "
                "machine (--device auto picks it) or pass --preset full.\n",
                f.f64("width"), static_cast<long long>(f.i64("epochs")), static_cast<long long>(f.i64("iters")),
                static_cast<long long>(f.i64("batch")));
  }
}

void OmniglotStudy::check_flags(const Flags& f, bool evaluating) const {
  // Flag against flag first, then the paths.
  if (f.str("trunk") == "conv4") {
    for (const char* k : {"width", "init", "sigmoid-embedding"})
      MN_CHECK(!f.user_changed(k), "--", k, " applies to --trunk koch only (conv4: --channels, PyTorch's "
               "initialisation, --conv4-sigmoid): leave --", k, " out or use --trunk koch");
    MN_CHECK(!f.flag("conv4-sigmoid") || f.i64("embedding") > 0,
             "--conv4-sigmoid needs a dense layer: give --embedding N");
  } else {
    for (const char* k : {"channels", "conv4-bn", "conv4-sigmoid"})
      MN_CHECK(!f.user_changed(k), "--", k, " applies to --trunk conv4 only (Koch's net: --width, --batchnorm)");
  }
  check_kind_flags(f);
  // members.cpp runs an ensemble as single runs (--members 1); a study never trains one itself.
  MN_CHECK(f.i64("members") == 1 || (evaluating && !f.user_set("members")), "--members ", f.i64("members"), ": ",
           evaluating ? "--evaluate scores trained networks: give the others' checkpoints with --ensemble"
                      : "an ensemble is trained by the omniglot binaries' own driver (run_omniglot_study), not here");
  if (evaluating) {
    // --evaluate needs only what it scores: Lake's runs (--data-dir/all_runs/) and --test-dir.
    std::string root = f.str("data-dir");
    if (!root.empty())
      MN_CHECK(is_directory(root), "--data-dir: '", root, "' is not a folder; give the folder holding all_runs/ "
               "(Lake's runs) or leave it out");
    else
      root = data::find_dataset_dir("omniglot");
    MN_CHECK((!root.empty() && is_directory(root + "/all_runs")) || !f.str("test-dir").empty(),
             "--evaluate: nothing to evaluate: ", root.empty() ? std::string("Omniglot was not found") : "'" + root +
             "' has no all_runs/ folder (Lake's runs)", " and no --test-dir was given; pass --data-dir with "
             "all_runs/ or --test-dir");
  } else if (!f.str("data-dir").empty()) {
    MN_CHECK(is_directory(f.str("data-dir")), "--data-dir: '", f.str("data-dir"), "' is not a folder; give the folder "
             "holding images_background/ (or leave it out to search the default places)");
    MN_CHECK(is_directory(f.str("data-dir") + "/images_background"), "--data-dir: '", f.str("data-dir"),
             "' has no images_background/ folder; give the Omniglot folder");
  } else {
    MN_CHECK(!data::find_dataset_dir("omniglot").empty(), "--data-dir: Omniglot not found in $MN_DATA_DIR, "
             "$DATA_DIR, ./datasets or ../shared/datasets; run data/fetch.sh or pass --data-dir");
  }
  if (!f.str("test-dir").empty())
    MN_CHECK(is_directory(f.str("test-dir")), "--test-dir: '", f.str("test-dir"), "' is not a folder; give an "
             "Omniglot-layout folder (alphabet/character/image.png)");
  check_ensemble_files(f);
  if (!f.str("cache-dir").empty() && !is_directory(f.str("cache-dir")))
    make_dirs(f.str("cache-dir"), "--cache-dir");
  if (!evaluating) {
    // One value per parameter group: checked now, not after the data is loaded.
    const size_t n = param_group_count(f);
    (void)per_group_list(f, "group-lr", n);
    (void)per_group_list(f, "group-momentum", n);
  }
}

std::vector<std::string> OmniglotStudy::architecture_keys() const {
  return {"width", "embedding", "activation", "lrn", "batchnorm", "dropout", "sigmoid-embedding", "share",
          "input-norm", "trunk", "channels", "conv4-bn", "conv4-sigmoid", "image-size"};
}

nn::Conv4Options OmniglotStudy::conv4_options(Device device) const {
  nn::Conv4Options co;
  co.input_size = f_->i64("image-size");
  co.channels = f_->i64("channels");
  co.embedding = f_->i64("embedding");
  co.batchnorm = f_->flag("conv4-bn");
  co.activation = activation_by_name(f_->str("activation"));
  co.lrn = f_->flag("lrn");
  co.pool_batchnorm = f_->flag("batchnorm");
  co.dropout = f_->f64("dropout");
  co.sigmoid_embedding = f_->flag("conv4-sigmoid");
  co.device = device;
  return co;
}

std::vector<nn::GroupSpec> OmniglotStudy::conv4_group_specs(bool head) const {
  // "conv": convolutions and batch-norm; "dense": the optional dense layer; "head": the siamese head.
  const double lr = f_->f64("lr");
  // A disjoint anchor trunk (triplet --share disjoint-anchor) joins its layers' groups.
  const bool anchor = f_->declared("share") && f_->str("share") == "disjoint-anchor";
  auto prefixes = [&](const std::string& layer) {
    std::vector<std::string> p{"branch." + layer};
    if (anchor) p.push_back("anchor_branch." + layer);
    return p;
  };
  std::vector<nn::GroupSpec> specs{{"conv", prefixes("block"), nn::hyper(lr, f_->f64("conv-decay"))}};
  if (f_->i64("embedding") > 0) specs.push_back({"dense", prefixes("dense"), nn::hyper(lr, f_->f64("dense-decay"))});
  if (head) specs.push_back({"head", {"head"}, nn::hyper(lr, f_->f64("dense-decay"))});
  return specs;
}

std::vector<double> per_group_list(const Flags& f, const std::string& key, size_t n) {
  std::vector<double> out;
  std::stringstream ss(f.str(key));
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    double v = std::strtod(item.c_str(), &end);
    MN_CHECK(!item.empty() && *end == '\0' && std::isfinite(v) && v >= 0, "--", key, ": '", item,
             "' is not a number >= 0");
    out.push_back(v);
  }
  MN_CHECK(out.empty() || out.size() == n, "--", key, ": expected ", n, " comma-separated values (one per "
           "parameter group), got ", out.size());
  return out;
}

std::vector<double> OmniglotStudy::per_group(const std::string& key, size_t n, double def) const {
  std::vector<double> v = per_group_list(*f_, key, n);
  return v.empty() ? std::vector<double>(n, def) : v;
}

// ----------------------------------------------------------------- set-up --
void OmniglotStudy::setup(RunContext& ctx) {
  f_ = &ctx.flags();
  device_ = ctx.device();
  init_gen_ = Generator(ctx.seed());
  sample_gen_ = Generator(ctx.seed() * 7919 + 17);
  loader_seed_ = ctx.seed() * 104729 + 3;
  data_ = std::make_unique<StudyData>(*f_, device_, /*evaluating=*/!f_->str("evaluate").empty());
  nn::KochBranchOptions o;
  o.input_size = f_->i64("image-size");
  o.width = f_->f64("width");
  o.embedding = f_->i64("embedding") > 0 ? f_->i64("embedding") : 4096;
  o.activation = activation_by_name(f_->str("activation"));
  o.lrn = f_->flag("lrn");
  o.batchnorm = f_->flag("batchnorm");
  o.dropout = f_->f64("dropout");
  o.sigmoid_embedding = f_->flag("sigmoid-embedding");
  o.init = f_->str("init") == "koch" ? nn::KochInit::koch() : nn::KochInit::study();
  o.device = device_;
  build_net(o, init_gen_);
  check_ensemble_tensors();
  std::vector<nn::ParamGroup> groups = param_groups();
  std::vector<double> lr_mult = per_group("group-lr", groups.size(), 1.0);
  std::vector<double> moms = per_group("group-momentum", groups.size(), f_->f64("momentum"));
  for (size_t i = 0; i < groups.size(); ++i) groups[i].lr *= lr_mult[i];
  const std::string opt = f_->str("optimizer");
  if (opt == "sgd")
    for (size_t i = 0; i < groups.size(); ++i) groups[i].momentum = moms[i];
  opt_ = optimizer_by_name(opt, groups);
  std::string sched = f_->str("lr-schedule");
  if (sched == "auto") sched = opt == "sgd" ? "exponential" : "constant";
  if (sched != "constant") {
    nn::ScheduleConfig sc;
    sc.gamma = f_->f64("lr-decay");
    sc.step_epochs = f_->i64("lr-step-epochs");
    sc.total_epochs = f_->i64("epochs");
    lr_sched_ = nn::schedule_registry().get(sched)(*opt_, sc);
  }
  if (opt == "sgd") mom_sched_ = std::make_unique<nn::MomentumRamp>(*opt_, 0.5, f_->i64("momentum-epochs"));
  if (ctx.world_size() > 1) {
    rank_ = ctx.rank();
    world_ = ctx.world_size();
    comm_ = &ctx.device_comm();
    dp_ = std::make_unique<nn::DataParallel>(model(), *comm_);
    if (Generator* g = dropout_generator()) g->set_state(rank_stream_seed(g->seed(), rank_), g->offset());
    if (f_->flag("sync-bn")) sync_bn_layers_ = nn::sync_batch_norms(model(), comm_);
    dp_->broadcast_from(0);  // the same seed made the same weights; this makes sure
  }
}

Json OmniglotStudy::data_parallel_summary() const {
  Json j;
  if (!dp_) return j;
  j["gradient_buckets"] = dp_->bucket_count();
  j["gradient_bytes_per_step"] = dp_->bytes_per_step();
  j["buckets_started_during_backward"] = dp_->buckets_overlapped();
  j["batch_norm"] = f_->flag("sync-bn") ? "synchronised over ranks (--sync-bn), " + std::to_string(sync_bn_layers_) +
                                              " layer(s)"
                                        : std::string("per rank (each rank's own rows)");
  return j;
}

Tensor OmniglotStudy::my_rows(const Tensor& t) const {
  if (world_ == 1) return t;
  const int64_t n = t.size(0) / world_;
  MN_CHECK(n * world_ == t.size(0), name(), ": a batch of ", t.size(0), " rows does not split over ", world_, " ranks");
  return t.narrow(0, rank_ * n, n);
}

void OmniglotStudy::backward(const ag::Variable& loss) {
  if (dp_) dp_->backward(loss);
  else loss.backward();
}

void OmniglotStudy::begin_epoch(int64_t epoch) {
  if (lr_sched_) lr_sched_->apply(epoch - 1);
  if (mom_sched_) mom_sched_->apply(epoch - 1);
  // The loader starts here, after a resume restored its generator state.
  if (!loader_started_ && loader_triplets() > 0) {
    // A data-parallel rank builds only its shard of every batch (the same draws on every rank).
    const int64_t B = loader_triplets(), mine = B / world_;
    MN_CHECK(mine * world_ == B, name(), ": a batch of ", B, " triplets does not split over ", world_, " ranks");
    data_->start_loader(B, loader_seed_, loader_offset_, rank_ * mine, mine);
    loader_started_ = true;
  }
}

// Each rank's dropout masks from a stream of its own: rank 0 keeps the seed (a 1-process
// run is unchanged), rank r > 0 a SplitMix64 of (seed, r). The offsets stay common (every
// rank draws as many blocks a step), so rank 0's checkpoint restores every rank's stream.
uint64_t rank_stream_seed(uint64_t seed, int rank) {
  if (rank == 0) return seed;
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(rank);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// ------------------------------------------------------------- checkpoints --
void OmniglotStudy::save_state(nn::Metadata& md) const {
  nn::put_generator_state(md, "rng.sample", sample_gen_);
  nn::put_generator_state(md, "rng.loader", loader_started_ ? Generator(data_->loader_seed(), data_->loader_offset())
                                                            : Generator(loader_seed_, loader_offset_));
  if (Generator* g = dropout_generator()) nn::put_generator_state(md, "rng.dropout", *g);
}

void OmniglotStudy::load_state(const nn::Metadata& md, const std::string& file) {
  nn::get_generator_state(md, "rng.sample", sample_gen_, file);
  if (Generator* g = dropout_generator()) {
    nn::get_generator_state(md, "rng.dropout", *g, file);  // rank 0's (it wrote the checkpoint)
    g->set_state(rank_stream_seed(g->seed(), rank_), g->offset());
  }
  Generator lg;
  nn::get_generator_state(md, "rng.loader", lg, file);
  loader_seed_ = lg.seed();
  loader_offset_ = lg.offset();
}

}  // namespace mn::exp
