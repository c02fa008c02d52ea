// The sampling study: flags, data, the seven strategies' training step and the
// resume state (see study.h). Evaluation: study_eval.cpp.
#include "experiments/sampling/study.h"

#include <algorithm>
#include <cmath>

#include "autograd/ops.h"
#include "kernels/distance.h"
#include "nn/losses/loss.h"
#include "nn/losses/losses.h"

namespace mn::exp::sampling {

const std::vector<StrategyInfo>& strategies() {
  static const std::vector<StrategyInfo> s{
      {Strategy::RandomOfflinePair, "random-offline-pair", "Random Offline Pair", false, true},
      {Strategy::HardNegativeOnlinePair, "hard-negative-online-pair", "Hard Negative Online Pair", true, true},
      {Strategy::AllPositiveOnlinePair, "all-positive-online-pair", "All Positive Online Pair", true, true},
      {Strategy::RandomOfflineTriplet, "random-offline-triplet", "Random Offline Triplet", false, false},
      {Strategy::AllPositiveOnlineTriplet, "all-positive-online-triplet", "All Positive Online Triplet", true, false},
      {Strategy::RandomNegativeOnlineTriplet, "random-negative-online-triplet", "Random Negative Online Triplet", true,
       false},
      {Strategy::SemiHardNegativeOnlineTriplet, "semi-hard-negative-online-triplet",
       "Semi-hard Negative Online Triplet", true, false}};
  return s;
}

const StrategyInfo& strategy_by_flag(const std::string& flag) {
  for (const auto& s : strategies())
    if (flag == s.flag) return s;
  std::string names;
  for (const auto& s : strategies()) names += std::string(names.empty() ? "" : ", ") + s.flag;
  MN_THROW("unknown sampling strategy '", flag, "'; valid: ", names);
}

const std::vector<std::string>& dataset_names() {
  static const std::vector<std::string> d{"mnist", "kmnist", "fashion-mnist"};
  return d;
}

int32_t default_unseen_class(const std::string& dataset) { return dataset == "fashion-mnist" ? 1 : 0; }

std::unique_ptr<Study> make_sampling_study() { return std::make_unique<SamplingStudy>(); }

// ------------------------------------------------------------------- flags --
void SamplingStudy::declare_flags(Flags& f) {
  f.add_string("dataset", "mnist", "data set (IDX files; KMNIST here has only its first 7,011 training images)",
               dataset_names());
  std::vector<std::string> names;
  for (const auto& s : strategies()) names.push_back(s.flag);
  f.add_string("strategy", "all-positive-online-pair", "sampling strategy (the study's seven table rows)", names);
  f.add_string("data-dir", "", "folder with the IDX files, or with mnist/, kmnist/, fashion-mnist/ subfolders "
               "(default: $MN_DATA_DIR, ./datasets or ../shared/datasets)");
  f.add_int("unseen-class", -1, "class removed from training (-1: the study's: MNIST 0, KMNIST 0, Fashion-MNIST 1 "
            "= Trouser)", -1, 9);
  f.add_int("max-train", 0, "use only the first N training images after the removal (0: all; quick runs)", 0,
            100000000);
  f.add_int("embedding-dim", 2, "embedding size (the study: 2, drawn as scatter plots)", 1, 4096);
  f.add_double("margin", 1.0, "margin m of the contrastive and triplet losses and of the triplet miners", 0.0);
  f.add_double("lr", 1e-3, "Adam learning rate", 0.0, 10.0);
  f.add_int("lr-step-epochs", 8, "learning rate x --lr-gamma every this many epochs", 1, 1000000);
  f.add_double("lr-gamma", 0.1, "learning-rate factor of the step schedule", 1e-9, 1.0);
  f.add_bool("lr-early-step", true, "step the schedule at the start of each epoch as the study's code does "
             "(lr 1e-3 / 1e-4 / 1e-5 for 7 / 8 / 5 epochs); --no-lr-early-step: 8 / 8 / 4");
  f.add_double("weight-decay", -1.0, "Adam weight decay (-1: the study's: 1e-4 for the online triplet strategies, "
               "0 otherwise)", -1.0, 1.0);
  f.add_int("batch", 128, "offline strategies: tuples per batch", 1, 1000000);
  f.add_int("classes-per-batch", 9, "online strategies: classes P of a balanced batch", 2, 10);
  f.add_int("per-class", 25, "online strategies: images K of each class in a balanced batch", 2, 100000);
  f.add_int("eval-batch", 1000, "images per forward pass when embedding for evaluation", 1, 1000000);
  f.add_int("test-seed", 29, "seed of the fixed test tuples and test batches (the study's RandomState(29))", 0,
            1LL << 40);
}

void SamplingStudy::check_flags(const Flags& f, bool) const {
  const StrategyInfo& s = strategy_by_flag(f.str("strategy"));
  if (s.online) {
    MN_CHECK(!f.user_set("batch"), "--batch is the offline strategies' tuple count; --strategy ", s.flag,
             " trains on balanced batches of --classes-per-batch x --per-class images");
    MN_CHECK(f.i64("classes-per-batch") <= 9, "--classes-per-batch ", f.i64("classes-per-batch"),
             ": training has 9 classes (one is unseen); use 2 to 9");
  } else {
    for (const char* k : {"classes-per-batch", "per-class"})
      MN_CHECK(!f.user_changed(k), "--", k, " applies to the online strategies only, not to --strategy ", s.flag);
  }
  dataset_dir(f.str("dataset"), f.str("data-dir"));  // throws naming --data-dir when there is none
}

// ------------------------------------------------------------------ set-up --
void SamplingStudy::setup(RunContext& ctx) {
  f_ = &ctx.flags();
  device_ = ctx.device();
  seed_ = ctx.seed();
  out_dir_ = ctx.out_dir();
  st_ = strategy_by_flag(f_->str("strategy"));
  int32_t unseen = static_cast<int32_t>(f_->i64("unseen-class"));
  if (unseen < 0) unseen = default_unseen_class(f_->str("dataset"));
  data_ = std::make_unique<StudyImages>(
      load_study_images(f_->str("dataset"), f_->str("data-dir"), unseen, f_->i64("max-train")));
  std::printf("%s: %lld training images (class %d '%s' removed), %lld test images%s%s\n", f_->str("dataset").c_str(),
              static_cast<long long>(data_->train.size()), unseen, data_->class_names[unseen].c_str(),
              static_cast<long long>(data_->test10.size()), data_->note.empty() ? "" : "; ", data_->note.c_str());
  if (st_.online) {
    const int64_t need = f_->i64("classes-per-batch") * f_->i64("per-class");
    MN_CHECK(data_->train.size() >= need, "--classes-per-batch x --per-class = ", need, " images per batch, but only ",
             data_->train.size(), " training images");
  }

  init_gen_ = Generator(seed_);
  nn::EmbeddingNetOptions o;
  o.embedding = f_->i64("embedding-dim");
  o.device = device_;
  net_ = std::make_unique<nn::EmbeddingNet>(o, init_gen_);
  double wd = f_->f64("weight-decay");
  if (wd < 0) wd = st_.online && !st_.pairs ? 1e-4 : 0.0;
  opt_ = std::make_unique<nn::Adam>(net_->parameters(), f_->f64("lr"), wd);
  sched_ = std::make_unique<nn::StepDecay>(*opt_, f_->i64("lr-step-epochs"), f_->f64("lr-gamma"));

  // Fixed test tuples (the study's test sets) and the matched-couple triplets.
  std::vector<int64_t> all(static_cast<size_t>(data_->test10.size()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  const uint64_t ts = static_cast<uint64_t>(f_->i64("test-seed"));
  const auto& yl = data_->test10.y;
  pairs10_ = fixed_test_pairs(yl, all, ts);
  pairs9_ = fixed_test_pairs(yl, data_->test9, ts);
  trip10_ = fixed_test_triplets(yl, all, ts, false);
  trip9_ = fixed_test_triplets(yl, data_->test9, ts, false);
  couple10_ = fixed_test_triplets(yl, all, ts + 1, true);
  couple9_ = fixed_test_triplets(yl, data_->test9, ts + 1, true);

  // The untrained net's scores (the offline-pair metric gets the same value
  // trained or not) and the "before training" scatter plot of Figure 4.
  if (!ctx.resuming() && f_->str("evaluate").empty()) untrained_ = untrained_metrics();
}

// -------------------------------------------------------------- training --
int64_t SamplingStudy::steps_per_epoch() const {
  const int64_t n = data_->train.size();
  if (st_.online) return std::max<int64_t>(1, n / (f_->i64("classes-per-batch") * f_->i64("per-class")));
  return (n + f_->i64("batch") - 1) / f_->i64("batch");
}

int64_t SamplingStudy::items_per_step() const {
  if (st_.online) return f_->i64("classes-per-batch") * f_->i64("per-class");
  return (st_.pairs ? 2 : 3) * f_->i64("batch");
}

void SamplingStudy::begin_epoch(int64_t epoch) {
  epoch_ = epoch;
  // StepLR stepped at the start of every epoch (the study's code): epoch e
  // (1-based) trains with gamma^floor(e / step); the late reading uses e - 1.
  sched_->apply(f_->flag("lr-early-step") ? epoch : epoch - 1);
  Generator g(seed_ * 2654435761ULL + 101, static_cast<uint64_t>(epoch) << 36);
  if (st_.online) {
    batches_ = balanced_batches(data_->train.y, [&] {
      std::vector<int64_t> v(static_cast<size_t>(data_->train.size()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i);
      return v;
    }(), static_cast<int>(f_->i64("classes-per-batch")), static_cast<int>(f_->i64("per-class")), steps_per_epoch(), g);
  } else {
    plan_ = st_.pairs ? offline_pairs(data_->train.y, g) : offline_triplets(data_->train.y, g);
  }
  cursor_ = epoch == resume_epoch_ ? resume_iter_ : 0;
}

kernels::MinerParams SamplingStudy::miner_params() const {
  kernels::MinerParams mp;
  mp.margin = f_->f64("margin");
  mp.unordered_positives = true;  // itertools.combinations in the study's selectors
  switch (st_.id) {
    case Strategy::RandomNegativeOnlineTriplet: mp.kind = kernels::MinerKind::RandomViolating; break;
    case Strategy::SemiHardNegativeOnlineTriplet: mp.kind = kernels::MinerKind::RandomSemiHard; break;
    default: mp.kind = kernels::MinerKind::AllTriplets; break;
  }
  return mp;
}

namespace {
std::vector<int64_t> host_i64(const Tensor& t) {
  Tensor c = t.to(Device::cpu()).contiguous();
  return std::vector<int64_t>(c.data<int64_t>(), c.data<int64_t>() + c.numel());
}
HostEmb host_emb(const Tensor& e) {
  HostEmb h;
  Tensor c = e.to(Device::cpu()).to(DType::F32).contiguous();
  h.n = c.size(0);
  h.d = c.size(1);
  h.v.assign(c.data<float>(), c.data<float>() + c.numel());
  return h;
}
Tensor labels_tensor(const std::vector<int32_t>& y, const std::vector<int64_t>& idx, Device d) {
  std::vector<int64_t> v;
  v.reserve(idx.size());
  for (int64_t i : idx) v.push_back(y[i]);
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}).to(d);
}
}  // namespace

Stats SamplingStudy::train_step() {
  const int64_t steps = steps_per_epoch(), step = cursor_++;
  MN_CHECK(step < steps, "sampling: step ", step, " beyond the epoch's ", steps);
  const uint64_t global = static_cast<uint64_t>((epoch_ - 1) * steps + step);
  Generator mine_gen(seed_ * 40503ULL + 7, global << 24);  // a pure function of the step: exact resumes
  const StepResult r = st_.online ? online_step(step, mine_gen) : offline_step(step);
  opt_->step();
  opt_->zero_grad();
  return {{"train_loss", r.loss}, {"train_acc", 100.0 * r.acc}, {"tuples", static_cast<double>(r.tuples)}};
}

// One class-balanced batch; the strategy's miner picks the tuples.
SamplingStudy::StepResult SamplingStudy::online_step(int64_t step, Generator& mine_gen) {
  const std::vector<int64_t>& idx = batches_[static_cast<size_t>(step)];
  Tensor labels = labels_tensor(data_->train.y, idx, device_);
  ag::Variable e = net_->forward(ag::Variable(gather_images(data_->train, idx, data_->side, device_)));
  const HostEmb he = host_emb(e.data());
  if (st_.pairs) return online_pairs(e, labels, he, mine_gen);
  if (st_.id == Strategy::AllPositiveOnlineTriplet) return online_all_triplets(e, labels, he);
  return online_mined_triplets(e, labels, he, mine_gen);
}

// Mining on the detached SQUARED distances (the study's pdist), losses on plain L2.
SamplingStudy::StepResult SamplingStudy::online_pairs(const ag::Variable& e, const Tensor& labels, const HostEmb& he,
                                                      Generator& mine_gen) {
  Tensor dist = kernels::pairwise_distance_matrix(e.data(), true);
  auto neg = st_.id == Strategy::HardNegativeOnlinePair ? kernels::PairNegatives::Hardest
                                                         : kernels::PairNegatives::Random;
  kernels::MinedPairs m = kernels::mine_pairs(dist, labels, neg, &mine_gen);
  nn::ContrastiveOptions co;
  co.form = nn::ContrastiveForm::Sampling;
  co.margin = f_->f64("margin");
  nn::LossOutput out = nn::contrastive_loss(e, m.pairs, m.is_pos, co);
  out.loss.backward();
  StepResult r;
  r.loss = out.host_stats().loss;
  r.tuples = m.pairs.size(0);
  const auto pr = host_i64(m.pairs);
  std::vector<double> dp, dn;
  for (int64_t k = 0; k < r.tuples; ++k) (k < m.num_pos ? dp : dn).push_back(he.dist(pr[2 * k], pr[2 * k + 1]));
  r.acc = couple_accuracy(dp, dn);
  return r;
}

// Every triplet (540,000 in a 9 x 25 batch): the fused batch-all loss on the
// distance matrix, no triplet list (nn "batch-all", kernels/batch_all.h).
SamplingStudy::StepResult SamplingStudy::online_all_triplets(const ag::Variable& e, const Tensor& labels,
                                                             const HostEmb& he) {
  if (!batch_all_) {
    nn::LossConfig lc;
    lc.margin = f_->f64("margin");
    lc.unordered_positives = true;
    batch_all_ = nn::make_loss("batch-all", lc);
  }
  nn::LossOutput out = batch_all_->compute(e, labels, nn::Mined{});
  out.loss.backward();
  StepResult r;
  r.loss = out.host_stats().loss;
  // Tuples and the study's accuracy (d(a,n) > d(a,p)) over the same triplets, on the host.
  const auto y = host_i64(labels);
  const int64_t B = static_cast<int64_t>(y.size());
  int64_t ok = 0;
  std::vector<double> row(static_cast<size_t>(B));
  for (int64_t a = 0; a < B; ++a) {
    for (int64_t j = 0; j < B; ++j) row[j] = he.dist(a, j);  // each distance once per anchor
    for (int64_t p = a + 1; p < B; ++p) {
      if (y[p] != y[a]) continue;
      for (int64_t n = 0; n < B; ++n)
        if (y[n] != y[a]) {
          ++r.tuples;
          ok += row[n] > row[p];
        }
    }
  }
  r.acc = r.tuples ? static_cast<double>(ok) / static_cast<double>(r.tuples) : 0.0;
  return r;
}

SamplingStudy::StepResult SamplingStudy::online_mined_triplets(const ag::Variable& e, const Tensor& labels,
                                                               const HostEmb& he, Generator& mine_gen) {
  kernels::MinedTriplets m =
      kernels::mine_triplets(kernels::pairwise_distance_matrix(e.data(), true), labels, miner_params(), &mine_gen);
  Tensor trip = m.triplets;
  if (trip.size(0) == 0) {
    // The study's selector then takes one triplet: the last class's last
    // anchor-positive pair with the first image of another class (batches
    // are class-grouped, so that is (B - 2, B - 1, 0)).
    const int64_t B = labels.size(0);
    trip = Tensor::from_vector(std::vector<int64_t>{B - 2, B - 1, 0}, {1, 3}).to(device_);
  }
  nn::TripletLossOptions to;
  to.kind = nn::TripletKind::MarginL2;
  to.margin = f_->f64("margin");
  nn::LossOutput out = nn::triplet_loss(e, trip, to);
  out.loss.backward();
  StepResult r;
  r.loss = out.host_stats().loss;
  r.tuples = trip.size(0);
  const auto t = host_i64(trip);
  int64_t ok = 0;
  for (int64_t k = 0; k < r.tuples; ++k) ok += he.dist(t[3 * k], t[3 * k + 2]) > he.dist(t[3 * k], t[3 * k + 1]);
  r.acc = static_cast<double>(ok) / static_cast<double>(r.tuples);
  return r;
}

// The epoch's fixed offline tuples, `batch` of them: anchors, then partners, then negatives.
SamplingStudy::StepResult SamplingStudy::offline_step(int64_t step) {
  const int64_t n = data_->train.size(), b0 = step * f_->i64("batch"), b1 = std::min(n, b0 + f_->i64("batch"));
  const int64_t m = b1 - b0;
  std::vector<int64_t> idx(plan_.order.begin() + b0, plan_.order.begin() + b1);
  idx.insert(idx.end(), plan_.partner.begin() + b0, plan_.partner.begin() + b1);
  if (!st_.pairs) idx.insert(idx.end(), plan_.negative.begin() + b0, plan_.negative.begin() + b1);
  ag::Variable e = net_->forward(ag::Variable(gather_images(data_->train, idx, data_->side, device_)));
  const HostEmb he = host_emb(e.data());
  StepResult r;
  r.tuples = m;
  if (st_.pairs) {
    std::vector<int64_t> pr, same;
    int64_t neg_nonzero = 0;
    for (int64_t k = 0; k < m; ++k) {
      pr.insert(pr.end(), {k, m + k});
      same.push_back(plan_.same[b0 + k]);
      if (!plan_.same[b0 + k] && he.dist(k, m + k) > 0) ++neg_nonzero;
    }
    nn::ContrastiveOptions co;
    co.form = nn::ContrastiveForm::Sampling;
    co.margin = f_->f64("margin");
    nn::LossOutput out = nn::contrastive_loss(e, Tensor::from_vector(pr, {m, 2}).to(device_),
                                              Tensor::from_vector(same, {m}).to(device_), co);
    out.loss.backward();
    r.loss = out.host_stats().loss;
    r.acc = static_cast<double>(neg_nonzero) / 64.0;  // the study's code: negatives with d > 0, over a fixed 64
    return r;
  }
  std::vector<int64_t> tr;
  int64_t ok = 0;
  for (int64_t k = 0; k < m; ++k) {
    tr.insert(tr.end(), {k, m + k, 2 * m + k});
    ok += he.dist(k, 2 * m + k) > he.dist(k, m + k);
  }
  nn::TripletLossOptions to;
  to.kind = nn::TripletKind::MarginL2;
  to.margin = f_->f64("margin");
  nn::LossOutput out = nn::triplet_loss(e, Tensor::from_vector(tr, {m, 3}).to(device_), to);
  out.loss.backward();
  r.loss = out.host_stats().loss;
  r.acc = static_cast<double>(ok) / static_cast<double>(m);
  return r;
}

// ------------------------------------------------------------- checkpoints --
void SamplingStudy::save_state(nn::Metadata& md) const {
  // The batches, offline tuples and miner draws are functions of (seed, epoch,
  // step): the position (the harness's "epoch" / "iter") is all a resume needs.
  for (const auto& [k, v] : untrained_) md["untrained." + k] = exact_text(v);
  std::string names;
  for (const auto& [k, v] : untrained_) names += (names.empty() ? "" : ",") + k;
  md["untrained.names"] = names;
}

void SamplingStudy::load_state(const nn::Metadata& md, const std::string& file) {
  const int64_t done = md_int(md, "epoch", file, 0, 1000000), iter = md_int(md, "iter", file, 0, 1LL << 40);
  resume_epoch_ = iter > 0 ? done + 1 : -1;
  resume_iter_ = iter;
  untrained_.clear();
  std::string names = md_string(md, "untrained.names", file), k;
  for (size_t s = 0; s <= names.size();) {
    size_t e = names.find(',', s);
    if (e == std::string::npos) e = names.size();
    k = names.substr(s, e - s);
    if (!k.empty()) untrained_.emplace_back(k, md_double(md, "untrained." + k, file));
    s = e + 1;
  }
}

std::string SamplingStudy::plot_title() const {
  return std::string("sampling: ") + st_.title + " on " + f_->str("dataset");
}

}  // namespace mn::exp::sampling
