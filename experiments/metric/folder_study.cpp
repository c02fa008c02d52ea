// metric_train (folder_study.h): flags, data, model, step, validation and test.
#include "experiments/metric/folder_study.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "autograd/variable.h"
#include "data/image_io.h"
#include "data/samplers.h"
#include "experiments/common/retrieval.h"
#include "kernels/indexing.h"
#include "kernels/join.h"
#include "nn/checkpoint.h"
#include "nn/losses/loss.h"
#include "nn/models/conv4.h"
#include "nn/models/embedding_net.h"
#include "nn/models/koch_branch.h"
#include "nn/models/mlp.h"
#include "nn/objective.h"
#include "nn/optim/optimizer.h"
#include "nn/registry.h"
#include "runtime/error.h"

namespace mn::exp {
namespace {

std::vector<int> parse_ks(const std::string& s) {
  std::vector<int> ks;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) {
    char* end = nullptr;
    const long v = std::strtol(t.c_str(), &end, 10);
    MN_CHECK(!t.empty() && end && *end == '\0' && v >= 1 && v <= 1000, "--recall-k ", s,
             ": give positive whole numbers separated by commas, e.g. 1,2,4,8");
    ks.push_back(static_cast<int>(v));
  }
  MN_CHECK(!ks.empty(), "--recall-k: give at least one K, e.g. 1,2,4,8");
  return ks;
}

// The miner a loss takes when --miner is auto: every tuple of the batch it consumes
// (pytorch-metric-learning's default when no miner is given).
std::string auto_miner(const std::string& loss) {
  const auto l = nn::loss_registry().get(loss)(nn::LossConfig{});
  switch (l->tuples()) {
    case nn::TupleKind::Triplets: return "all-triplets";
    case nn::TupleKind::Pairs: return "all-pairs";
    default: return "none";
  }
}

class MetricFolderStudy : public Study {
 public:
  std::string name() const override { return "metric_train"; }
  std::string description() const override {
    return "Metric learning on your own images: a folder of class folders in (ROOT/<class>/<image>), a trained "
           "embedding out, validated on held-out classes with Recall@K, MAP@R and one-shot accuracy.";
  }
  int64_t default_epochs() const override { return 20; }
  void declare_flags(Flags& f) override;
  void check_flags(const Flags& f, bool evaluating) const override;
  std::vector<std::string> architecture_keys() const override {
    return {"trunk", "channels", "image-size", "embedding", "width", "hidden", "invert"};
  }
  std::vector<std::string> evaluation_keys() const override { return {"loss", "distance"}; }
  std::vector<std::string> resume_may_change() const override { return {"eval-batch", "cache-dir"}; }
  bool can_evaluate() const override { return true; }
  void setup(RunContext& ctx) override;
  int64_t steps_per_epoch() const override { return f_->i64("iters"); }
  std::string steps_per_epoch_flag() const override { return "iters"; }
  int64_t items_per_step() const override { return f_->i64("classes-per-batch") * f_->i64("per-class"); }
  Stats train_step() override;
  Stats validate() override;
  std::string selection_metric() const override { return "val_" + f_->str("select"); }
  int64_t validation_work() const override { return val_.size(); }
  std::string final_test(Json& out) override;
  nn::Module& model() override { return *trunk_; }
  nn::Optimizer* optimizer() override { return opt_.get(); }
  void save_state(nn::Metadata& md) const override { nn::put_generator_state(md, "rng.sample", sample_gen_); }
  void load_state(const nn::Metadata& md, const std::string& file) override {
    nn::get_generator_state(md, "rng.sample", sample_gen_, file);
  }

 private:
  // Recall@K, MAP@R, R-precision and one-shot accuracy of `ds` under the current model.
  Stats scores(const data::FolderDataset& ds, const std::string& prefix);
  void load_data();

  const Flags* f_ = nullptr;
  Device device_;
  data::FolderDataset train_, val_, test_;
  std::unique_ptr<data::ClassIndex> train_index_;
  std::shared_ptr<nn::Module> trunk_;
  std::unique_ptr<nn::Objective> objective_;
  std::unique_ptr<nn::Optimizer> opt_;
  Generator sample_gen_;
  uint64_t seed_ = 0;
};

void MetricFolderStudy::declare_flags(Flags& f) {
  // ---- data
  f.add_string("data-dir", "", "a folder of class folders (ROOT/<class>/<image>: PNG, JPEG, BMP or PGM); its classes "
               "are split into training, validation and test classes (--val-classes, --test-classes)");
  f.add_string("train-dir", "", "instead of --data-dir: the training classes' folder (then --val-dir, optional "
               "--test-dir)");
  f.add_string("val-dir", "", "the validation classes' folder (with --train-dir)");
  f.add_string("test-dir", "", "the test classes' folder (with --train-dir; none: the final test uses validation)");
  f.add_double("val-classes", 0.2, "--data-dir: share of the classes held out for validation", 0.0, 0.9);
  f.add_double("test-classes", 0.2, "--data-dir: share of the classes held out for the final test", 0.0, 0.9);
  f.add_int("split-seed", 0, "--data-dir: seed of the class split (the same split for every --seed)", 0, INT64_MAX);
  f.add_int("channels", 1, "1: grey (colour converted by luma), 3: RGB", 1, 3);
  f.add_int("image-size", 28, "images are resized once to this square size (box filter)", 4, 1024);
  f.add_bool("invert", false, "dark strokes on white paper (Omniglot, handwriting): feed 1 - v/255 so ink is 1");
  f.add_string("cache-dir", "", "where the decoded images are cached (empty: the default cache folder, "
               "$MN_CACHE_DIR or ~/.cache/metricnet; 'none': no cache)");
  // ---- model
  f.add_string("trunk", "conv4", "conv4: 4 x [conv 3x3, batch-norm, ReLU, max-pool 2] + dense; embedding-net: "
               "Bielski's 2 conv + 3 dense; mlp: dense layers on the flattened image; koch: Koch et al.'s net (grey "
               "105x105 only)", {"conv4", "embedding-net", "mlp", "koch"});
  f.add_int("embedding", 128, "size of the embedding", 2, 65536);
  f.add_int("width", 64, "conv4: channels of every block", 1, 4096);
  f.add_int("hidden", 512, "mlp: width of its two hidden layers; embedding-net: of its hidden layer", 1, 65536);
  // ---- objective
  std::vector<std::string> losses;
  for (const std::string& n : nn::loss_registry().names())
    if (n != "koch-siamese" && n != "lmnn") losses.push_back(n);
  f.add_string("loss", "multi-similarity", "the loss (names as pytorch-metric-learning's; docs/library.md maps them)",
               losses);
  std::vector<std::string> miners{"auto"};
  for (const std::string& n : nn::miner_registry().names()) miners.push_back(n);
  f.add_string("miner", "auto", "the miner (auto: every tuple of the batch the loss consumes, as pml without a "
               "miner)", miners);
  f.add_double("margin", NAN, "the loss's margin (default: the loss's own: 0.2 triplet, 1.0 contrastive)");
  f.add_string("distance", "auto", "distance for evaluation: euclidean, cosine, or auto (cosine for "
               "multi-similarity, else Euclidean)", {"auto", "euclidean", "cosine"});
  // ---- training
  f.add_int("classes-per-batch", 32, "P: classes in a batch", 2, 100000);
  f.add_int("per-class", 4, "K: images of each class in a batch", 2, 100000);
  f.add_int("iters", 100, "batches an epoch", 1, INT64_MAX);
  f.add_string("optimizer", "adam", "the optimizer", nn::optimizer_registry().names());
  f.add_double("lr", 1e-3, "learning rate", 0.0, 10.0);
  f.add_double("weight-decay", 0.0, "L2 weight decay (decoupled for adamw)", 0.0, 1.0);
  // ---- evaluation
  f.add_string("recall-k", "1,2,4,8", "the K of Recall@K, comma-separated");
  f.add_int("one-shot-way", 5, "N of the N-way one-shot tasks (0: none)", 0, 1000);
  f.add_int("one-shot-tasks", 1000, "one-shot tasks a validation draws (the same tasks every epoch)", 1, 1000000);
  f.add_string("select", "map_at_r", "the validation score that picks best.safetensors",
               {"map_at_r", "recall_at_1", "one_shot_percent"});
  f.add_int("eval-batch", 256, "images embedded at a time in evaluation", 1, 1000000);
  f.set_help_groups({
      {"data", true, {"data-dir", "train-dir", "val-dir", "test-dir", "val-classes", "test-classes", "split-seed",
                      "channels", "image-size", "invert", "cache-dir"}},
      {"model", true, {"trunk", "embedding", "width", "hidden"}},
      {"objective", true, {"loss", "miner", "margin", "distance"}},
      {"training", true, {"epochs", "iters", "classes-per-batch", "per-class", "optimizer", "lr", "weight-decay",
                          "device", "seed", "out-dir", "resume", "time-limit"}},
      {"evaluation", true, {"recall-k", "one-shot-way", "one-shot-tasks", "select", "eval-batch", "evaluate", "export-weights"}},
  });
}

void MetricFolderStudy::check_flags(const Flags& f, bool evaluating) const {
  const bool whole = !f.str("data-dir").empty(), parts = !f.str("train-dir").empty();
  MN_CHECK(whole != parts, whole ? "--data-dir and --train-dir: give one of them"
                                 : "give --data-dir ROOT (a folder of class folders), or --train-dir and --val-dir");
  if (parts && !evaluating)
    MN_CHECK(!f.str("val-dir").empty(), "--train-dir needs --val-dir (the validation classes' folder)");
  MN_CHECK(whole || (!f.user_set("val-classes") && !f.user_set("test-classes")),
           "--val-classes / --test-classes split --data-dir; with --train-dir the folders are the split");
  MN_CHECK(f.str("trunk") != "koch" || (f.i64("channels") == 1 && f.i64("image-size") == 105),
           "--trunk koch is Koch et al.'s net on grey 105x105 images: give --channels 1 --image-size 105, or "
           "use --trunk conv4");
  MN_CHECK(f.str("trunk") != "conv4" || f.i64("image-size") >= 16, "--trunk conv4 pools 4 times: --image-size must "
           "be at least 16 (got ", f.i64("image-size"), ")");
  MN_CHECK(f.str("trunk") != "embedding-net" || f.i64("image-size") >= 16, "--trunk embedding-net needs "
           "--image-size of at least 16 (got ", f.i64("image-size"), ")");
  (void)parse_ks(f.str("recall-k"));
  if (f.str("miner") != "auto") (void)nn::Objective::from_names(f.str("loss"), f.str("miner"));  // kinds must match
  MN_CHECK(f.str("select") != "one_shot_percent" || f.i64("one-shot-way") > 0,
           "--select one_shot_percent needs one-shot tasks: --one-shot-way N");
}

void MetricFolderStudy::load_data() {
  const Flags& f = *f_;
  data::FolderLoadOptions o;
  o.channels = static_cast<int>(f.i64("channels"));
  o.image_size = static_cast<int>(f.i64("image-size"));
  o.cache_dir = f.str("cache-dir") == "none" ? "" : f.str("cache-dir").empty() ? data::default_cache_dir()
                                                                               : f.str("cache-dir");
  o.verbose = true;
  if (!f.str("data-dir").empty()) {
    const data::FolderDataset all = data::load_image_folder(f.str("data-dir"), o);
    Generator g(static_cast<uint64_t>(f.i64("split-seed")));
    const data::ClassSplit s = data::split_classes(all.num_classes(), f.f64("val-classes"), f.f64("test-classes"), g);
    train_ = data::subset_classes(all, s.train);
    val_ = data::subset_classes(all, s.val);
    test_ = data::subset_classes(all, s.test);
  } else {
    train_ = data::load_image_folder(f.str("train-dir"), o);
    if (!f.str("val-dir").empty()) val_ = data::load_image_folder(f.str("val-dir"), o);
    if (!f.str("test-dir").empty()) test_ = data::load_image_folder(f.str("test-dir"), o);
  }
  std::printf("metric_train: %lld training images of %lld classes, %lld validation images of %lld classes, %lld test "
              "images of %lld classes\n", static_cast<long long>(train_.size()),
              static_cast<long long>(train_.num_classes()), static_cast<long long>(val_.size()),
              static_cast<long long>(val_.num_classes()), static_cast<long long>(test_.size()),
              static_cast<long long>(test_.num_classes()));
}

void MetricFolderStudy::setup(RunContext& ctx) {
  f_ = &ctx.flags();
  device_ = ctx.device();
  seed_ = ctx.seed();
  load_data();
  const int P = static_cast<int>(f_->i64("classes-per-batch")), K = static_cast<int>(f_->i64("per-class"));
  if (!train_.files.empty()) {
    train_index_ = std::make_unique<data::ClassIndex>(train_.labels);
    const size_t eligible = train_index_->classes_with_at_least(K).size();
    MN_CHECK(eligible >= size_t(P), "--classes-per-batch ", P, " --per-class ", K, ": only ", eligible,
             " training classes have ", K, " images; lower --classes-per-batch or --per-class");
  }
  // The evaluation sets must hold what a validation scores, known before any training.
  const int way = static_cast<int>(f_->i64("one-shot-way"));
  for (const auto* ds : {&val_, &test_}) {
    if (ds->files.empty() || way == 0) continue;
    std::map<int32_t, int> n;
    for (int32_t l : ds->labels) ++n[l];
    int usable = 0;
    for (const auto& [c, k] : n) usable += k >= 2;
    MN_CHECK(usable >= way, "--one-shot-way ", way, ": the ", ds == &val_ ? "validation" : "test", " classes have ",
             usable, " classes with 2 or more images, fewer than the tasks' ", way, " (lower --one-shot-way, 0 for "
             "none, or hold out more classes)");
  }
  Generator init(seed_);
  trunk_ = make_folder_trunk(*f_, init, device_);
  nn::LossConfig lc;
  if (std::isfinite(f_->f64("margin"))) lc.margin = f_->f64("margin");
  nn::MinerConfig mc;
  if (std::isfinite(f_->f64("margin"))) mc.margin = f_->f64("margin");
  const std::string miner = f_->str("miner") == "auto" ? auto_miner(f_->str("loss")) : f_->str("miner");
  objective_ = std::make_unique<nn::Objective>(nn::Objective::from_names(f_->str("loss"), miner, lc, mc));
  nn::ParamGroup g;
  g.params = trunk_->parameters();
  g.lr = f_->f64("lr");
  g.weight_decay = f_->f64("weight-decay");
  g.name = "all";
  opt_ = nn::optimizer_registry().get(f_->str("optimizer"))({g});
  sample_gen_ = Generator(seed_ ^ 0x5eed5a3b1e5ULL);
}

Stats MetricFolderStudy::train_step() {
  trunk_->train();
  const std::vector<int64_t> idx = data::sample_pk_batch(*train_index_, static_cast<int>(f_->i64("classes-per-batch")),
                                                         static_cast<int>(f_->i64("per-class")), sample_gen_);
  std::vector<int64_t> labels;
  for (int64_t i : idx) labels.push_back(train_.labels[size_t(i)]);
  const Tensor images = kernels::index_select(train_.images, 0, Tensor::from_vector(idx, {int64_t(idx.size())}));
  const Tensor x = folder_inputs(images, f_->flag("invert"), device_);
  const Tensor y = Tensor::from_vector(labels, {int64_t(labels.size())}).to(device_);
  nn::ObjectiveOutput out = (*objective_)(trunk_->forward(ag::Variable(x)), y, &sample_gen_);
  out.loss.backward();
  opt_->step();
  opt_->zero_grad();
  Stats s;
  for (const auto& [k, v] : out.named_stats()) {
    if (k == "loss") s.insert(s.begin(), {"train_loss", v});
    else if (k == "active_fraction") s.push_back({"active_share", v});
  }
  return s;
}

Stats MetricFolderStudy::scores(const data::FolderDataset& ds, const std::string& prefix) {
  const bool cosine = folder_uses_cosine(*f_);
  const Tensor emb = embed_images(*trunk_, ds.images, f_->flag("invert"), device_, f_->i64("eval-batch"));
  const RetrievalMetrics m = retrieval_metrics(emb, ds.labels, parse_ks(f_->str("recall-k")), cosine);
  Stats s;
  for (const auto& [k, v] : m.recall_at) s.push_back({prefix + "recall_at_" + std::to_string(k), v});
  s.push_back({prefix + "map_at_r", m.map_at_r});
  s.push_back({prefix + "r_precision", m.r_precision});
  const int way = static_cast<int>(f_->i64("one-shot-way"));
  if (way > 0)
    s.push_back({prefix + "one_shot_percent",
                 one_shot_accuracy(emb, ds.labels, way, static_cast<int>(f_->i64("one-shot-tasks")), seed_ + 77,
                                   cosine)});
  return s;
}

Stats MetricFolderStudy::validate() { return scores(val_, "val_"); }

std::string MetricFolderStudy::final_test(Json& out) {
  const bool have_test = !test_.files.empty();
  const data::FolderDataset& ds = have_test ? test_ : val_;
  MN_CHECK(!ds.files.empty(), "the final test has no images: give --test-dir (or --val-dir), or --data-dir with "
           "--test-classes above 0");
  const std::string set = have_test ? "test" : "validation";
  const Stats s = scores(ds, "");
  std::ostringstream md;
  md << "Final test on the " << ds.num_classes() << " " << set << " classes (" << ds.size() << " images; "
     << (folder_uses_cosine(*f_) ? "cosine" : "Euclidean") << " distance)"
     << (have_test ? "" : ": no test classes were held out, so these are the validation classes the model was "
                          "chosen on") << ":\n\n| metric | % |\n|---|---:|\n";
  for (const auto& [k, v] : s) {
    out["test"][k] = v;
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", v);
    md << "| " << k << " | " << b << " |\n";
  }
  out["test"]["set"] = set;
  out["test"]["classes"] = ds.num_classes();
  out["test"]["images"] = ds.size();
  return md.str();
}

}  // namespace

std::shared_ptr<nn::Module> make_folder_trunk(const Flags& f, Generator& g, Device device) {
  const std::string t = f.str("trunk");
  const int64_t C = f.i64("channels"), S = f.i64("image-size"), E = f.i64("embedding");
  std::shared_ptr<nn::Module> m;
  if (t == "conv4") {
    nn::Conv4Options o;
    o.in_channels = C, o.input_size = S, o.channels = f.i64("width"), o.embedding = E;
    m = std::make_shared<nn::Conv4>(o, g);
  } else if (t == "embedding-net") {
    nn::EmbeddingNetOptions o;
    o.in_channels = C, o.input_size = S, o.hidden = f.i64("hidden"), o.embedding = E;
    m = std::make_shared<nn::EmbeddingNet>(o, g);
  } else if (t == "mlp") {
    nn::MLPOptions o;
    o.sizes = {C * S * S, f.i64("hidden"), f.i64("hidden"), E};
    m = std::make_shared<nn::MLP>(o, g);
  } else {
    nn::KochBranchOptions o;
    o.input_size = S, o.embedding = E;
    m = std::make_shared<nn::KochBranch>(o, g);
  }
  m->to(device);
  return m;
}

Tensor folder_inputs(const Tensor& images_u8, bool invert, Device device) {
  Tensor x = data::to_float(images_u8, invert ? data::FloatMode::Ink01 : data::FloatMode::Gray01);
  return x.to(device);
}

bool folder_uses_cosine(const Flags& f) {
  const std::string d = f.str("distance");
  return d == "cosine" || (d == "auto" && f.str("loss") == "multi-similarity");
}

Tensor embed_images(nn::Module& trunk, const Tensor& images_u8, bool invert, Device device, int64_t batch) {
  trunk.eval();
  ag::NoGradGuard no_grad;
  std::vector<Tensor> parts;
  const int64_t n = images_u8.size(0);
  for (int64_t i = 0; i < n; i += batch) {
    const Tensor x = folder_inputs(images_u8.narrow(0, i, std::min(batch, n - i)).contiguous(), invert, device);
    Tensor e = trunk.forward(ag::Variable(x)).data();
    if (e.dim() > 2) e = e.reshape({e.size(0), e.numel() / e.size(0)});
    parts.push_back(e.to(Device::cpu()).contiguous());
  }
  MN_CHECK(!parts.empty(), "embed_images: no images to embed");
  return parts.size() == 1 ? parts[0] : kernels::concat(parts, 0);
}

std::unique_ptr<Study> make_metric_folder_study() { return std::make_unique<MetricFolderStudy>(); }

}  // namespace mn::exp
