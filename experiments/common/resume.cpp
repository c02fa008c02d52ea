// The resume contract (harness.h) and the checks of a checkpoint given to --resume
// or --evaluate: the stored configuration restored and a differing flag refused
// (apply_resume_contract, apply_evaluate_checkpoint), the architecture, world size
// and existence of the checkpoint checked, and the epoch loop's progress as
// last.safetensors's metadata (put_progress, load_progress). It calls the public
// harness (harness.h: md_* readers, Flags), check_regular_file and the Study.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "experiments/common/epoch_loop.h"
#include "experiments/common/harness_internal.h"
#include "nn/module.h"
#include "runtime/error.h"

namespace mn::exp {

// Changing these on --resume changes how long or where the run goes on, not what
// it computes: --epochs (restored when not given), the stop flags and the device
// of this invocation, the out dir being resumed, and where the data and its
// packed cache live (they must hold the same data).
const std::vector<std::string> kResumeMayChange = {"epochs",    "time-limit", "stop-after", "collective-timeout",
                                                   "device",    "log-every",  "cuda-graph", "precision",
                                                   "out-dir",   "resume",     "data-dir",   "cache-dir"};

namespace {
// Flags of one invocation: never restored from a checkpoint.
const char* kPerInvocation[] = {"time-limit", "stop-after", "collective-timeout", "device",
                                 "out-dir",    "resume",     "evaluate",           "export-weights"};

bool is_per_invocation(const std::string& k) {
  return std::find(std::begin(kPerInvocation), std::end(kPerInvocation), k) != std::end(kPerInvocation);
}

// The stored value as flag text (what a config file would hold).
std::string stored_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return v.dump();
  return v.dump();  // set() rejects it, naming the key
}

std::string source_name(Flags::Origin o) {
  return o == Flags::Origin::Config ? "the --config file" : "the command line";
}
}  // namespace

// The resume contract (harness.h): restore the stored configuration, refuse a
// given flag that differs from it (except the ones allowed to change).
void apply_resume_contract(Flags& f, const Study& st, const std::string& ckpt) {
  nn::Metadata md = nn::read_safetensors_metadata(ckpt);
  const std::string& who = md_string(md, "study", ckpt);
  if (who != st.name())
    throw UsageError("--resume: '" + ckpt + "' was written by " + who + ", not " + st.name() +
                     "; resume it with " + who + " or choose another --out-dir");
  Json cfg = Json::parse(md_string(md, "config", ckpt), nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object())
    MN_THROW("--resume: '", ckpt, "': metadata 'config' is not a JSON object of flags");
  std::vector<std::string> may = kResumeMayChange;
  for (auto& k : st.resume_may_change()) may.push_back(k);
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    const std::string& k = it.key();
    if (!f.declared(k)) {
      std::fprintf(stderr, "warning: --resume: '%s' stores flag '%s', which this binary no longer has; ignored\n",
                   ckpt.c_str(), k.c_str());
      continue;
    }
    if (is_per_invocation(k)) continue;
    const bool given = f.user_set(k);
    const Flags::Origin o = f.origin(k);
    const std::string mine = f.text(k);
    f.set(k, stored_text(it.value()), Flags::Origin::Checkpoint, "--resume: '" + ckpt + "' metadata config." + k);
    if (!given || f.text(k) == mine) continue;
    const std::string theirs = f.text(k);
    if (std::find(may.begin(), may.end(), k) != may.end()) {
      f.set(k, mine, o, source_name(o));
      continue;
    }
    throw UsageError("--resume: --" + k + " is " + mine + " on " + source_name(o) + " but the run in '" + ckpt +
                     "' used " + theirs + "; a resumed run keeps its configuration (only --epochs, --time-limit, "
                     "--stop-after, --collective-timeout, --device, --log-every, --out-dir, --data-dir, --cache-dir "
                     "may change): drop --" + k + " or start a new run in another --out-dir");
  }
}

// --evaluate: the checkpoint must come from this study; its architecture and
// evaluation flags are restored (a flag given again wins).
void apply_evaluate_checkpoint(Flags& f, const Study& st, const std::string& ckpt) {
  check_regular_file(ckpt, "--evaluate");
  nn::Metadata md = nn::read_safetensors_metadata(ckpt);
  const std::string& who = md_string(md, "study", ckpt);
  if (who != st.name())
    throw UsageError("--evaluate: '" + ckpt + "' is a checkpoint of " + who + ", not of " + st.name() +
                     " (a different network): evaluate it with " + who);
  Json cfg = Json::parse(md_string(md, "config", ckpt), nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object())
    MN_THROW("--evaluate: '", ckpt, "': metadata 'config' is not a JSON object of flags");
  std::vector<std::string> keys = st.architecture_keys();
  for (const auto& k : st.evaluation_keys()) keys.push_back(k);
  for (const auto& k : keys) {
    auto it = cfg.find(k);
    if (it == cfg.end() || f.user_set(k)) continue;
    f.set(k, stored_text(*it), Flags::Origin::Checkpoint, "--evaluate: '" + ckpt + "' metadata config." + k);
  }
}

namespace {
// The architecture flags (Study::architecture_keys) whose value did not come
// from `file`'s metadata config, each as "--key value (where it came from)".
std::string flags_not_from_file(const Study& st, const Flags& f, const std::string& file) {
  const nn::Metadata md = nn::read_safetensors_metadata(file);
  auto c = md.find("config");
  const Json cfg = c == md.end() ? Json() : Json::parse(c->second, nullptr, false);
  std::string out;
  for (const auto& k : st.architecture_keys()) {
    if (!f.declared(k) || f.origin(k) == Flags::Origin::Checkpoint) continue;
    const Flags::Origin o = f.origin(k);
    const std::string from = o == Flags::Origin::CommandLine ? "the command line"
                             : o == Flags::Origin::Config    ? "the --config file"
                             : o == Flags::Origin::Preset    ? "a preset"
                                                             : "the default";
    const bool stored = cfg.is_object() && cfg.contains(k);
    const std::string theirs = !stored ? "" : cfg[k].is_string() ? cfg[k].get<std::string>() : cfg[k].dump();
    if (stored && theirs == f.text(k)) continue;
    out += (out.empty() ? "--" : ", --") + k + " " + f.text(k) + " (" + from + "; the file's config " +
           (stored ? "has " + theirs : "has no '" + k + "': written by an older version or edited?") + ")";
  }
  return out;
}
}  // namespace

void check_architecture_matches(Study& st, const Flags& f, const std::string& file, const char* flag) {
  const std::map<std::string, Shape> shapes = nn::read_safetensors_shapes(file);
  std::set<std::string> model_names;
  std::string mismatch;  // the first tensor of the model the file lacks or has in another shape
  auto visit = [&](const std::string& name, const Tensor& t) {
    model_names.insert(name);
    auto it = shapes.find(name);
    if (!mismatch.empty()) return;
    if (it == shapes.end())
      mismatch = "has no tensor '" + name + "' (" + shape_str(t.shape()) + " in the model)";
    else if (it->second != t.shape())
      mismatch = "has tensor '" + name + "' of shape " + shape_str(it->second) + " but the model's is " +
                 shape_str(t.shape());
  };
  for (const auto& [name, v] : st.model().named_parameters()) visit(name, v.data());
  for (const auto& [name, b] : st.model().named_buffers())
    if (b->defined()) visit(name, *b);
  std::string unused;  // tensors of the file the model does not have (not the optimizer's)
  int64_t n_unused = 0;
  for (const auto& [name, s] : shapes)
    if (!model_names.count(name) && name.rfind("optim.", 0) != 0) {
      if (++n_unused <= 4) unused += (unused.empty() ? "'" : ", '") + name + "' " + shape_str(s);
    }
  if (mismatch.empty() && n_unused == 0) return;
  const std::string sources = flags_not_from_file(st, f, file);
  const std::string why = sources.empty() ? "the model was built from its metadata config, which therefore disagrees "
                                            "with its tensors (edited, or written by another version)"
                                          : "the architecture flags not taken from its metadata config: " + sources;
  const bool resuming = std::string(flag) == "--resume";
  MN_CHECK(mismatch.empty(), flag, ": '", file, "' ", mismatch, ": the architecture flags build the model and win "
           "over the file, whose tensors do not fit them; ", why, resuming ? ". This run cannot be resumed; start a "
           "new one in another --out-dir" : ". Give the architecture flags that match its tensors");
  std::fprintf(stderr, "warning: %s: '%s' holds %lld tensor%s the model does not have (%s%s): the architecture flags "
               "build the model and win over the file, so these weights are ignored; %s\n", flag, file.c_str(),
               static_cast<long long>(n_unused), n_unused == 1 ? "" : "s", unused.c_str(), n_unused > 4 ? ", ..." : "",
               why.c_str());
}

// The ranks' shards of each batch and the averaged gradients depend on the world's
// size: a run continues with the size it started with.
void check_resume_world_size(const nn::Metadata& md, const std::string& file) {
  const int64_t saved = md.count("world_size") ? md_int(md, "world_size", file, 1, 1 << 20) : 1;
  const int now = world_size_from_env();
  MN_CHECK(saved == now, "--resume: '", file, "' was written by a run over ", saved,
           saved == 1 ? " process" : " ranks", " but this run has ", now, ": resume it with ",
           saved == 1 ? std::string("a single process (no mpirun)") : "mpirun -np " + std::to_string(saved),
           " (changing the number of ranks mid-run is not supported), or start a new run in another --out-dir");
}

void check_resume_checkpoint(const std::string& out_dir, const std::string& ckpt) {
  struct stat s;
  if (::stat(ckpt.c_str(), &s) == 0 || errno != ENOENT) {
    check_regular_file(ckpt, "--resume");
    return;
  }
  // No checkpoint: say whether a run was started in --out-dir (it writes
  // config.txt before its first step) and why it left nothing to resume.
  std::ifstream cfg(out_dir + "/config.txt");
  if (!cfg) {
    MN_THROW("--resume: cannot open '", ckpt, "': ", std::strerror(ENOENT), "; no run was started in --out-dir '",
             out_dir, "' (it has no config.txt either): start one without --resume");
  }
  std::string line, limit;
  while (std::getline(cfg, line))
    if (line.rfind("time-limit = ", 0) == 0) limit = line.substr(13);
  const bool had_limit = !limit.empty() && std::strtod(limit.c_str(), nullptr) > 0;
  MN_THROW("--resume: cannot open '", ckpt, "': ", std::strerror(ENOENT), "; the run started in --out-dir '", out_dir,
           "' (its config.txt exists) stopped before it saved anything: a run writes last.safetensors only when it "
           "stops resumably (exit status 3) or at the end of an epoch, and ",
           had_limit ? "either its --time-limit " + limit + " s (config.txt) was too short for even one training "
                       "step, which refuses a new run before it starts, or it failed before its first checkpoint"
                     : std::string("it failed before its first checkpoint (see that run's error)"),
           ". Start the run again without --resume", had_limit ? " and with a longer --time-limit" : "");
}

// ------------------------------------------- the epoch loop's progress --
void put_progress(nn::Metadata& md, const LoopState& ls, int64_t epochs_done, int64_t iter, const Stats& sums,
                  double epoch_train_s, double best, int64_t best_epoch) {
  md["epoch"] = std::to_string(epochs_done);
  md["iter"] = std::to_string(iter);
  md["best_score"] = exact_text(best);
  md["best_epoch"] = std::to_string(best_epoch);
  std::string names;
  for (const auto& [k, v] : sums) {
    names += (names.empty() ? "" : ",") + k;
    md["partial." + k] = exact_text(v);
  }
  md["partial.names"] = names;
  md["partial.train_seconds"] = exact_text(epoch_train_s);
  md["train_seconds_total"] = exact_text(ls.total_train_s);
  md["last_val_seconds"] = exact_text(ls.last_val_s);
  md["step_seconds"] = exact_text(ls.step_s);
  if (!ls.best_hash.empty()) md["best_xxh3"] = ls.best_hash;
}

LoopState load_progress(Study& st, const Flags& f, const std::string& file, int64_t iters) {
  check_architecture_matches(st, f, file, "--resume");
  nn::Metadata md = nn::load_checkpoint(file, st.model(), st.optimizer());
  check_resume_world_size(md, file);
  LoopState ls;
  ls.start_epoch = md_int(md, "epoch", file, 0, 1000000);
  ls.start_iter = md_int(md, "iter", file, 0, 1LL << 40);
  ls.best = md_double(md, "best_score", file);
  if (std::isnan(ls.best)) ls.best = -1.0 / 0.0;
  ls.best_epoch = md_int(md, "best_epoch", file, -1, ls.start_epoch);
  ls.total_train_s = md_double(md, "train_seconds_total", file);
  ls.last_val_s = md_double(md, "last_val_seconds", file);
  ls.step_s = md_double(md, "step_seconds", file);
  ls.partial_train_s = md_double(md, "partial.train_seconds", file);
  if (auto h = md.find("best_xxh3"); h != md.end()) ls.best_hash = h->second;
  std::stringstream names(md_string(md, "partial.names", file));
  std::string k;
  while (std::getline(names, k, ','))
    if (!k.empty()) ls.partial.emplace_back(k, md_double(md, "partial." + k, file));
  const std::string steps_flag = st.steps_per_epoch_flag();
  MN_CHECK(ls.start_iter <= iters, "--resume: '", file, "' stopped at step ", ls.start_iter, " of an epoch, but an "
           "epoch has ", iters, " steps now",
           steps_flag.empty() ? std::string()
                              : " (--" + steps_flag + " " + f.text(steps_flag) + "): give the stopped run's --" +
                                    steps_flag + " (at least " + std::to_string(ls.start_iter) + ") to resume it, "
                                    "or start a new run in another --out-dir");
  st.load_state(md, file);
  return ls;
}

}  // namespace mn::exp
