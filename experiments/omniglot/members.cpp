// --members N: an ensemble trained and scored by one command (see
// omniglot_study.h). The binary's main comes here first; with N > 1 (given, or
// set by a preset) it trains N networks one after another, each a complete run
// of the same configuration with its own seed (--seed, --seed + 1000, ...) in
// OUT/member-K/ (checkpoints, metrics, curve, summary and its own Lake score),
// then scores the final test with all of them at once (--evaluate of member 1's
// best model with --ensemble the others', mean of the scores) into OUT/, and
// writes OUT/report.md beside OUT/members.json (the plan and what is finished).
//
// The members' configuration is frozen at the start as OUT/members.cfg (every
// flag after the presets, so a member is exactly the single run it would be);
// --resume --out-dir OUT skips finished members, resumes the unfinished one and
// scores the ensemble; --time-limit spans the whole ensemble.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>

#include "data/dataset.h"
#include "experiments/common/flags.h"
#include "experiments/common/json.h"
#include "experiments/omniglot/omniglot_base.h"
#include "experiments/omniglot/omniglot_study.h"
#include "runtime/device.h"
#include "runtime/error.h"

namespace mn::exp {
namespace {

constexpr int64_t kSeedStride = 1000;  // member K trains with --seed + 1000 (K - 1)

std::unique_ptr<Study> make_study(StudyKind kind) {
  return kind == StudyKind::Triplet ? make_omniglot_triplet_study() : make_omniglot_siamese_study();
}

struct EnsemblePlan {
  std::string out_dir, device, config;  // config: members.cfg's text
  int64_t members = 0, seed = 0;
  double time_limit = 0;
  std::vector<int64_t> finished;
  std::vector<std::string> commands;  // every invocation that worked on this ensemble
  std::map<std::string, std::string> eval_flags;  // what the final test reads (data, test tasks, views)
  std::map<std::string, std::string> where;       // --data-dir / --cache-dir of this invocation, for the members
};

std::string member_dir(const EnsemblePlan& p, int64_t k) { return p.out_dir + "/member-" + std::to_string(k); }
int64_t member_seed(const EnsemblePlan& p, int64_t k) { return p.seed + kSeedStride * (k - 1); }

Json plan_json(const EnsemblePlan& p) {
  Json j;
  j["members"] = p.members;
  j["seed"] = p.seed;
  j["seed_stride"] = kSeedStride;
  j["finished"] = p.finished;
  j["commands"] = p.commands;
  j["eval_flags"] = p.eval_flags;
  return j;
}

void save_plan(const EnsemblePlan& p) {
  write_file_atomic(p.out_dir + "/members.json", plan_json(p).dump(2) + "\n");
}

// The configuration every member shares: all flags after the presets but the
// ones of one invocation and the seed; --members 1 (a member is a single run).
std::string members_config(const std::map<std::string, std::string>& cfg) {
  const std::set<std::string> skip = {"config", "seed", "members", "out-dir", "resume", "evaluate",
                                      "time-limit", "stop-after", "device"};
  std::string text = "# the members' shared configuration, written by --members (members.cpp)\nmembers = 1\n";
  for (const auto& [k, v] : cfg)  // (deterministic = false would override MN_DETERMINISTIC in the members)
    if (!skip.count(k) && !(k == "deterministic" && v == "false")) text += k + " = " + config_value_text(v) + "\n";
  return text;
}

std::map<std::string, std::string> config_of(StudyKind kind, const std::vector<std::string>& args) {
  std::map<std::string, std::string> cfg = study_config(*make_study(kind), args, Device::cpu());
  const std::string d = cfg["device"];
  if (d != "cpu" && cuda_available())  // the presets may depend on the device
    cfg = study_config(*make_study(kind), args, d == "auto" ? Device::cuda(0) : parse_device(d));
  return cfg;
}

EnsemblePlan read_plan(const std::string& out_dir) {
  const std::string file = out_dir + "/members.json";
  std::ifstream in(file);
  Json j = Json::parse(in, nullptr, false);
  MN_CHECK(!j.is_discarded() && j.is_object() && j.contains("members") && j.contains("seed"), "--resume: '", file,
           "' is not an ensemble plan written by --members (damaged?): start the ensemble again in another --out-dir");
  EnsemblePlan p;
  p.out_dir = out_dir;
  p.members = j["members"].get<int64_t>();
  p.seed = j["seed"].get<int64_t>();
  p.finished = j.value("finished", std::vector<int64_t>{});
  p.eval_flags = j.value("eval_flags", std::map<std::string, std::string>{});
  p.commands = j.value("commands", std::vector<std::string>{});
  return p;
}

// nullopt: not an ensemble run (or the flags are wrong, which run_study then reports).
std::optional<EnsemblePlan> ensemble_plan(StudyKind kind, const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "--help-all" || a == "-h" || a.rfind("--evaluate", 0) == 0) return std::nullopt;
  std::map<std::string, std::string> cfg;
  try {
    cfg = config_of(kind, args);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string out = cfg["out-dir"];
  const bool have_plan = is_directory(out) && std::ifstream(out + "/members.json").good();
  EnsemblePlan p;
  if (cfg["resume"] == "true") {
    if (!have_plan) return std::nullopt;  // a single run's --resume
    p = read_plan(out);
    // A resumed ensemble keeps its size: a --members given again must say the same.
    const bool given = std::any_of(args.begin(), args.end(), [](const std::string& a) {
      return a == "--members" || a.rfind("--members=", 0) == 0;
    });
    const int64_t asked = std::stoll(cfg["members"]);
    MN_CHECK(!given || asked == p.members, "--resume --members ", asked, ": the ensemble in '", out, "' has ",
             p.members, " members (its members.json); a resumed ensemble keeps its size: drop --members, or start a ",
             asked, "-member ensemble in another --out-dir");
  } else {
    p.members = std::stoll(cfg["members"]);
    if (p.members <= 1) return std::nullopt;
    MN_CHECK(!have_plan, "--members: --out-dir '", out, "' holds an ensemble run already (members.json): continue "
             "it with --resume, or give another --out-dir");
    MN_CHECK(cfg["ensemble"].empty(), "--members ", p.members, " with --ensemble: the members' ensemble is scored "
             "by itself; leave --ensemble out (it is for scoring checkpoints you already have)");
    p.out_dir = out;
    p.seed = std::stoll(cfg["seed"]);
    p.config = members_config(cfg);
    for (const char* k : {"data-dir", "cache-dir", "test-dir", "test-tasks", "test-way", "test-seed", "tta",
                          "tta-scale", "eval-batch", "eval-distance"})
      if (cfg.count(k) && !cfg[k].empty()) p.eval_flags[k] = cfg[k];
  }
  std::string command = make_study(kind)->name();
  for (const auto& a : args) command += " " + a;
  p.commands.push_back(command);
  p.device = cfg["device"];
  p.time_limit = std::stod(cfg["time-limit"]);
  for (const char* k : {"data-dir", "cache-dir"})  // where the data is may change between invocations
    if (!cfg[k].empty()) p.eval_flags[k] = p.where[k] = cfg[k];
  return p;
}

int run_with(StudyKind kind, std::vector<std::string> args) {
  args.insert(args.begin(), make_study(kind)->name());  // (the binary's name, in the members' provenance)
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  return run_study(make_study(kind), static_cast<int>(av.size()), av.data());
}

bool finished(const EnsemblePlan& p, int64_t k) {
  return std::find(p.finished.begin(), p.finished.end(), k) != p.finished.end();
}

// Trains the members not finished yet; kExitOk when all are.
int train_members(StudyKind kind, EnsemblePlan& p, std::chrono::steady_clock::time_point start) {
  for (int64_t k = 1; k <= p.members; ++k) {
    if (finished(p, k)) continue;
    std::vector<std::string> a = {"--config", p.out_dir + "/members.cfg", "--seed", std::to_string(member_seed(p, k)),
                                  "--out-dir", member_dir(p, k), "--device", p.device};
    for (const auto& [key, v] : p.where) a.push_back("--" + key + "=" + v);
    if (std::ifstream(member_dir(p, k) + "/last.safetensors").good()) a.push_back("--resume");
    if (p.time_limit > 0) {
      const double left = p.time_limit - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (left < 1) {
        std::printf("\nstopped: --time-limit reached before member %lld of %lld; continue with the same command "
                    "and --resume\n", static_cast<long long>(k), static_cast<long long>(p.members));
        return kExitResumable;
      }
      a.insert(a.end(), {"--time-limit", exact_text(left)});
    }
    std::printf("\n== member %lld of %lld (--seed %lld) in %s\n", static_cast<long long>(k),
                static_cast<long long>(p.members), static_cast<long long>(member_seed(p, k)), member_dir(p, k).c_str());
    std::fflush(stdout);
    const int rc = run_with(kind, a);
    if (rc == kExitResumable)
      std::printf("the ensemble stopped inside member %lld; continue with the same command and --resume\n",
                  static_cast<long long>(k));
    if (rc != kExitOk) return rc;
    p.finished.push_back(k);
    save_plan(p);
  }
  return kExitOk;
}

// The final test with every member: --evaluate member 1's best model with --ensemble the others'.
int score_ensemble(StudyKind kind, const EnsemblePlan& p) {
  std::string root = p.eval_flags.count("data-dir") ? p.eval_flags.at("data-dir") : data::find_dataset_dir("omniglot");
  if (!is_directory(root + "/all_runs") && !p.eval_flags.count("test-dir")) {
    std::printf("\nthe ensemble is not scored: no Lake runs (all_runs/) in '%s' and no --test-dir\n", root.c_str());
    return kExitOk;
  }
  std::string others;
  for (int64_t k = 2; k <= p.members; ++k) others += (k > 2 ? "," : "") + member_dir(p, k) + "/best.safetensors";
  std::vector<std::string> a = {"--evaluate", member_dir(p, 1) + "/best.safetensors", "--ensemble", others,
                                "--out-dir", p.out_dir, "--device", p.device};
  for (const auto& [k, v] : p.eval_flags) a.push_back("--" + k + "=" + v);
  std::printf("\n== the ensemble of %lld members: the final test\n", static_cast<long long>(p.members));
  std::fflush(stdout);
  return run_with(kind, a);
}

Json read_json(const std::string& file) {
  std::ifstream in(file);
  return in ? Json::parse(in, nullptr, false) : Json();
}

std::string percent_cell(const Json& j, const char* part) {
  if (!j.is_object() || !j.contains(part) || !j[part].contains("accuracy_percent")) return "-";
  const Json& r = j[part];
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2f (%.1f-%.1f)", r["accuracy_percent"].get<double>(),
                r["accuracy_ci95_percent"][0].get<double>(), r["accuracy_ci95_percent"][1].get<double>());
  return buf;
}

void write_report(const EnsemblePlan& p) {
  std::string md = "# An ensemble of " + std::to_string(p.members) + " networks (--members)\n\n"
                   "Each member is a complete run of `members.cfg` with its own seed; the ensemble scores every "
                   "task with the mean of the members' scores (`--ensemble`).\n\n"
                   "| member | --seed | best val one-shot % | train s | Lake's 400 trials % (95 % CI) | --test-dir % |\n"
                   "|---|---:|---:|---:|---|---|\n";
  for (int64_t k = 1; k <= p.members; ++k) {
    const Json s = read_json(member_dir(p, k) + "/summary.json");
    char buf[64] = "-", tbuf[32] = "-";
    if (s.is_object() && s.contains("best_val_one_shot_percent"))
      std::snprintf(buf, sizeof buf, "%.2f", s["best_val_one_shot_percent"].get<double>());
    if (s.is_object() && s.contains("train_seconds"))
      std::snprintf(tbuf, sizeof tbuf, "%.0f", s["train_seconds"].get<double>());
    md += "| member-" + std::to_string(k) + " | " + std::to_string(member_seed(p, k)) + " | " + buf + " | " + tbuf +
          " | " + percent_cell(s, "lake") + " | " + percent_cell(s, "test_dir") + " |\n";
  }
  const Json e = read_json(p.out_dir + "/evaluation.json");
  md += "| **ensemble** | | | | **" + percent_cell(e, "lake") + "** | " + percent_cell(e, "test_dir") + " |\n";
  write_file_atomic(p.out_dir + "/report.md", md);
}

int run_ensemble(StudyKind kind, EnsemblePlan& p) {
  const auto start = std::chrono::steady_clock::now();
  make_dirs(p.out_dir, "--out-dir");
  if (!p.config.empty())  // a new ensemble: freeze its configuration
    write_file_atomic(p.out_dir + "/members.cfg", p.config);
  save_plan(p);  // (with this invocation's command)
  std::printf("== An ensemble of %lld runs (--members %lld), trained one after another with seeds %lld, %lld, ... "
              "and scored together; the table: %s/report.md\n", static_cast<long long>(p.members),
              static_cast<long long>(p.members), static_cast<long long>(p.seed),
              static_cast<long long>(p.seed + kSeedStride), p.out_dir.c_str());
  std::fflush(stdout);
  if (int rc = train_members(kind, p, start); rc != kExitOk) return rc;
  const int rc = score_ensemble(kind, p);
  write_report(p);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\n== %lld members; this invocation took %.0f s; table: %s/report.md\n",
              static_cast<long long>(p.members), s, p.out_dir.c_str());
  return rc;
}

}  // namespace

int run_omniglot_study(StudyKind kind, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::optional<EnsemblePlan> plan;
  try {
    plan = ensemble_plan(kind, args);
    if (plan) return run_ensemble(kind, *plan);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", make_study(kind)->name().c_str(), user_message(e).c_str());
    return plan ? kExitFailed : kExitUsage;
  }
  return run_study(make_study(kind), argc, argv);
}

}  // namespace mn::exp
