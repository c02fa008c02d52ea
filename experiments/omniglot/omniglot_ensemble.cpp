// --ensemble: the final test scored by several trained networks of one
// architecture at once (see omniglot_base.h). Each member is a checkpoint; the
// model itself is member 0. A score matrix is the mean of the members' score
// matrices (distances for the triplet net, so with --eval-distance cosine the
// mean cosine distance, which orders candidates as the distance between the
// concatenated unit embeddings does; similarities for the siamese net). The
// members' weights are held in memory and copied into the one model in turn,
// so the study's scoring code (score_inputs, score_views) serves every member.
#include <filesystem>
#include <sstream>

#include "experiments/common/json.h"
#include "experiments/omniglot/omniglot_base.h"
#include "kernels/elementwise.h"
#include "nn/checkpoint.h"
#include "runtime/error.h"

namespace mn::exp {

std::vector<std::string> ensemble_paths(const std::string& list) {
  std::vector<std::string> out;
  size_t from = 0;
  while (true) {
    const size_t comma = list.find(',', from);
    out.push_back(list.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    MN_CHECK(!out.back().empty(), "--ensemble '", list, "': an empty checkpoint path (give comma-separated files, "
             "no empty items)");
    if (comma == std::string::npos) return out;
    from = comma + 1;
  }
}

// The model's parameters, then its defined buffers, in a fixed order.
std::vector<Tensor> OmniglotStudy::model_tensors() {
  std::vector<Tensor> t;
  for (const auto& [name, v] : model().named_parameters()) t.push_back(v.data());
  for (const auto& [name, b] : model().named_buffers())
    if (b->defined()) t.push_back(*b);
  return t;
}

// Before any data is read: every member exists, comes from this study and was
// built with the same architecture flags (a mistake found after hours of
// training would lose the run's final test).
void OmniglotStudy::check_ensemble_files(const Flags& f) const {
  if (f.str("ensemble").empty()) return;
  const Json mine = Json::parse(f.to_json());
  for (const std::string& path : ensemble_paths(f.str("ensemble"))) {
    std::error_code ec;
    MN_CHECK(std::filesystem::is_regular_file(path, ec), "--ensemble: '", path, "' is not a checkpoint file (",
             std::filesystem::exists(path, ec) ? "not a regular file" : "no such file", ")");
    const nn::Metadata md = nn::read_safetensors_metadata(path);
    const std::string& who = md_string(md, "study", path);
    MN_CHECK(who == name(), "--ensemble: '", path, "' is a checkpoint of ", who, ", not of ", name(),
             ": every member must be a network of this study");
    const Json cfg = Json::parse(md_string(md, "config", path), nullptr, false);
    MN_CHECK(cfg.is_object(), "--ensemble: '", path, "': metadata 'config' is not a JSON object of flags");
    for (const std::string& k : architecture_keys()) {
      auto it = cfg.find(k);
      if (it == cfg.end() || !mine.contains(k) || *it == mine[k]) continue;
      MN_THROW("--ensemble: '", path, "' was trained with --", k, " ", it->dump(), " but this network has --", k,
               " ", mine[k].dump(), ": the members of an ensemble share one architecture");
    }
  }
}

// Once the model is built: every member's tensors have the model's names and shapes.
void OmniglotStudy::check_ensemble_tensors() {
  if (f_->str("ensemble").empty()) return;
  for (const std::string& path : ensemble_paths(f_->str("ensemble"))) {
    const std::map<std::string, Shape> shapes = nn::read_safetensors_shapes(path);
    auto check = [&](const std::string& n, const Tensor& t) {
      auto s = shapes.find(n);
      MN_CHECK(s != shapes.end(), "--ensemble: '", path, "' has no tensor '", n, "' (the model has it)");
      MN_CHECK(s->second == t.shape(), "--ensemble: '", path, "' has tensor '", n, "' of another shape than the "
               "model's");
    };
    for (const auto& [n, v] : model().named_parameters()) check(n, v.data());
    for (const auto& [n, b] : model().named_buffers())
      if (b->defined()) check(n, *b);
  }
}

// Member 0 is the model as it is now; the others are read from their files.
void OmniglotStudy::load_ensemble() {
  members_.clear();
  if (f_->str("ensemble").empty()) return;
  auto snapshot = [&] {
    std::vector<Tensor> s;
    for (const Tensor& t : model_tensors()) s.push_back(t.clone());
    return s;
  };
  members_.push_back(snapshot());
  try {
    for (const std::string& path : ensemble_paths(f_->str("ensemble"))) {
      nn::load_checkpoint(path, model(), nullptr);
      members_.push_back(snapshot());
    }
  } catch (...) {
    use_member(0);
    members_.clear();
    throw;
  }
  use_member(0);
}

void OmniglotStudy::use_member(size_t i) {
  std::vector<Tensor> dst = model_tensors();
  const std::vector<Tensor>& src = members_.at(i);
  MN_CHECK(dst.size() == src.size(), "--ensemble: member ", i, " holds ", src.size(), " tensors, the model ",
           dst.size());
  for (size_t k = 0; k < dst.size(); ++k) dst[k].copy_(src[k]);
}

void OmniglotStudy::drop_ensemble() {
  if (members_.empty()) return;
  use_member(0);
  members_.clear();
}

Tensor OmniglotStudy::ensemble_scores(const std::function<Tensor()>& score) {
  if (members_.empty()) return score();
  Tensor sum;
  for (size_t m = 0; m < members_.size(); ++m) {
    use_member(m);
    Tensor s = score();
    sum = m == 0 ? s : kernels::add(sum, s);
  }
  use_member(0);
  return kernels::mul_scalar(sum, 1.0 / static_cast<double>(members_.size()));
}

// The report's lines on the ensemble, with the validation one-shot accuracy of
// this model alone and of the ensemble (the same tasks), then loads the members.
std::string OmniglotStudy::begin_ensemble(Json& out) {
  if (f_->str("ensemble").empty()) return "";
  const std::vector<std::string> paths = ensemble_paths(f_->str("ensemble"));
  const bool val = data_->has_splits();
  const double single = val ? val_one_shot_percent(1) : 0.0;
  load_ensemble();
  std::string text = "- ensemble: every score is the mean over " + std::to_string(members_.size()) +
                     " networks, this one and --ensemble";
  for (const auto& p : paths) text += " " + p;
  text += "\n";
  out["ensemble"] = paths;
  if (val) {
    const double both = val_one_shot_percent(1);
    char buf[160];
    std::snprintf(buf, sizeof buf, "- validation one-shot: %.2f %% this network alone, %.2f %% the ensemble\n", single,
                  both);
    text += buf;
    out["val_one_shot_single_percent"] = metric_number(single);
    out["val_one_shot_ensemble_percent"] = metric_number(both);
  }
  return text;
}

}  // namespace mn::exp
