// The Omniglot studies' evaluation (see omniglot_base.h): score matrices with
// optional test-time views, validation (verification + one-shot tasks), the
// final test (Lake's 400 trials, --test-dir tasks).
#include <cmath>
#include <cstdio>
#include <map>

#include "data/lake_runs.h"
#include "data/omniglot.h"
#include "experiments/omniglot/omniglot_base.h"
#include "experiments/omniglot/one_shot_report.h"
#include "kernels/elementwise.h"
#include "runtime/error.h"

namespace mn::exp {

// -------------------------------------------------------------- evaluation --
void check_finite_scores(const std::vector<double>& v, const std::string& what, const char* values) {
  for (size_t i = 0; i < v.size(); ++i)
    MN_CHECK(std::isfinite(v[i]), what, ": the network's ", values, " hold ",
             std::isnan(v[i]) ? "NaN" : "Inf", " (value ", i, " of ", v.size(), "), so no accuracy can be "
             "computed: its outputs overflowed or its weights are not finite (a diverged run or a damaged "
             "checkpoint); evaluate another checkpoint");
}

// (Q, H, W) x (C, H, W) uint8 -> (Q, C): distances (triplet) or similarities
// (siamese), averaged over `views` views of both sides.
Tensor OmniglotStudy::score_matrix(const Tensor& queries, const Tensor& candidates, const char* what,
                                   int64_t views) {
  ag::NoGradGuard ng;
  model().eval();
  std::vector<Tensor> q{data_->to_input(queries)}, c{data_->to_input(candidates)};
  for (int64_t v = 1; v < views; ++v) {
    q.push_back(data_->tta_view(q[0], v, 0));
    c.push_back(data_->tta_view(c[0], v, 1));
  }
  Tensor out = ensemble_scores([&] { return views > 1 ? score_views(q, c) : score_inputs(q[0], c[0]); })
                   .to(Device::cpu());
  model().train();
  check_finite_scores(out.to_double_vector(), what,
                      score_kind() == data::ScoreKind::Cost ? "distances" : "similarities");
  return out;  // (on the host: the scorers read it there)
}

Tensor OmniglotStudy::score_views(const std::vector<Tensor>& queries, const std::vector<Tensor>& candidates) {
  Tensor sum = score_inputs(queries[0], candidates[0]);
  for (size_t v = 1; v < queries.size(); ++v) sum = kernels::add(sum, score_inputs(queries[v], candidates[v]));
  return kernels::mul_scalar(sum, 1.0 / static_cast<double>(queries.size()));
}

double OmniglotStudy::val_one_shot_percent(int64_t views) {
  data::OneShotResult os = data::evaluate_tasks(
      data_->val_set(), data_->val_tasks(),
      [&](const Tensor& q, const Tensor& c) { return score_matrix(q, c, "validation (one-shot tasks)", views); },
      score_kind());
  return 100.0 - os.error_percent;
}

Stats OmniglotStudy::validate() {
  const double verif = verification_accuracy();
  return {{"val_verification_percent", 100 * verif}, {"val_one_shot_percent", val_one_shot_percent(1)}};
}

// Images a validation embeds: 3 per verification triplet (2 per pair, counted
// as 3 to err on the safe side) and an anchor plus N candidates per task.
int64_t OmniglotStudy::validation_work() const {
  return 3 * f_->i64("val-triplets") + f_->i64("val-tasks") * (f_->i64("val-way") + 1);
}

// N-way tasks from --test-dir (any Omniglot-layout folder); `groups` gets one
// (alphabet, correct, trials) entry per alphabet the tasks drew from.
bool OmniglotStudy::test_dir_eval(data::OneShotResult* r, std::vector<GroupScore>* groups,
                                  std::vector<std::string>* left_out) {
  if (f_->str("test-dir").empty()) return false;
  data::OmniglotLoadOptions lo;
  lo.cache_dir = data_->cache_dir();
  data::ImageDataset ds = data::load_omniglot_set(f_->str("test-dir"), lo);
  *left_out = check_way(ds, "--test-way", f_->i64("test-way"), "--test-dir '" + f_->str("test-dir") + "'");
  data::TaskOptions to;
  to.n_way = static_cast<int>(f_->i64("test-way"));
  to.num_tasks = static_cast<int>(f_->i64("test-tasks"));
  to.seed = static_cast<uint64_t>(f_->i64("test-seed"));
  to.kind = data::TaskKind::LakeKoch;
  auto tasks = data::make_one_shot_tasks(ds, to);
  *r = data::evaluate_tasks(
      ds, tasks,
      [&](const Tensor& q, const Tensor& c) { return score_matrix(q, c, "--test-dir tasks", f_->i64("tta")); },
      score_kind());
  std::map<int32_t, GroupScore> by_alphabet;
  for (size_t t = 0; t < tasks.size() && t < r->group_error_percent.size(); ++t) {
    GroupScore& g = by_alphabet[tasks[t].alphabet];
    const auto q = static_cast<int64_t>(tasks[t].queries.size());
    g.name = tasks[t].alphabet >= 0 && tasks[t].alphabet < static_cast<int32_t>(ds.alphabet_names.size())
                 ? ds.alphabet_names[static_cast<size_t>(tasks[t].alphabet)] : "all";
    g.correct += (1.0 - r->group_error_percent[t] / 100.0) * static_cast<double>(q);
    g.trials += q;
  }
  for (auto& [a, g] : by_alphabet) groups->push_back(g);
  return true;
}

std::string OmniglotStudy::final_test(Json& out) {
  // --ensemble: every score below is the members' mean; the model is restored after.
  struct Restore {
    OmniglotStudy* s;
    ~Restore() { s->drop_ensemble(); }
  } restore{this};
  std::string text = begin_ensemble(out);
  const int64_t views = f_->i64("tta");
  if (views > 1) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "- test-time augmentation: %lld views of every image (--tta), distortions at %g "
                  "of Koch's ranges (--tta-scale), scored %s\n", static_cast<long long>(views), f_->f64("tta-scale"),
                  name() == "omniglot_triplet" ? "by the distance of their mean embeddings" : "by the mean of their scores");
    text += buf;
    out["tta_views"] = views;
    out["tta_scale"] = f_->f64("tta-scale");
    if (data_->has_splits()) {  // the same model on validation, plain and with the views
      const double plain = val_one_shot_percent(1), tta = val_one_shot_percent(views);
      std::snprintf(buf, sizeof buf, "- validation one-shot: %.2f %% plain, %.2f %% with %lld views\n", plain, tta,
                    static_cast<long long>(views));
      text += buf;
      out["val_one_shot_plain_percent"] = metric_number(plain);
      out["val_one_shot_tta_percent"] = metric_number(tta);
    }
  }
  if (!data_->lake_dir().empty()) {
    data::OneShotResult r = data::evaluate_lake_runs_batched(
        data_->lake_runs(),
        [&](const Tensor& q, const Tensor& c) { return score_matrix(q, c, "Lake's runs", views); }, score_kind());
    // Lake's runs: one group per run, its trials equal shares of the total.
    std::vector<GroupScore> runs;
    const size_t nr = r.group_error_percent.size();
    for (size_t i = 0; i < nr; ++i) {
      GroupScore g;
      char name[32];
      std::snprintf(name, sizeof name, "run%02zu", i + 1);
      g.name = name;
      g.trials = r.trials / static_cast<int64_t>(nr);
      g.correct = (1.0 - r.group_error_percent[i] / 100.0) * static_cast<double>(g.trials);
      runs.push_back(g);
    }
    text += result_line("Lake's 400 trials", r, runs, "Lake run");
    out["lake"] = result_json(r, runs, "per_run");
  } else {
    text += "- Lake's runs not found (no all_runs/ folder): no Lake test\n";
  }
  data::OneShotResult tr;
  std::vector<GroupScore> alphabets;
  std::vector<std::string> left_out;
  if (test_dir_eval(&tr, &alphabets, &left_out)) {
    text += result_line("--test-dir " + f_->str("test-dir") + " (--test-seed " + f_->text("test-seed") + ")", tr,
                        alphabets, "alphabet");
    if (!left_out.empty()) {
      text += "- left out of the --test-dir tasks (fewer than --test-way " + f_->text("test-way") + " characters):";
      for (size_t i = 0; i < left_out.size(); ++i) text += (i ? ", " : " ") + left_out[i];
      text += "\n";
    }
    out["test_dir"] = result_json(tr, alphabets, "per_alphabet");
    out["test_dir"]["alphabets_left_out"] = left_out;
    out["test_dir"]["seed"] = f_->i64("test-seed");
  }
  return text;
}

}  // namespace mn::exp
