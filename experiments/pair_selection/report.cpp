// Summaries, tables, JSON and the figure of the pair-selection study; see report.h.
#include "experiments/pair_selection/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "experiments/common/flags.h"
#include "experiments/common/json.h"
#include "runtime/error.h"

namespace mn::pairsel {

std::vector<Curve> summarise(const std::vector<RunResult>& runs) {
  std::vector<Curve> out;
  for (int mi = 0; mi < kNumMethods; ++mi) {
    std::vector<const RunResult*> rs;
    for (const auto& r : runs)
      if (static_cast<int>(r.method) == mi) rs.push_back(&r);
    if (rs.empty()) continue;
    std::sort(rs.begin(), rs.end(), [](auto* a, auto* b) { return a->fold < b->fold; });
    Curve c;
    c.method = static_cast<Method>(mi);
    const size_t E = rs[0]->points.size(), F = rs.size();
    for (size_t e = 0; e < E; ++e) {
      c.epochs.push_back(rs[0]->points[e].epoch);
      std::vector<double> acc;
      double nm = 0.0, ab = 0.0;
      for (const RunResult* r : rs) {
        MN_CHECK(r->points.size() == E && r->points[e].epoch == c.epochs.back(),
                 "pair_selection: summary", method_label(c.method), " fold ", r->fold,
                 " has different evaluation epochs");
        acc.push_back(100.0 * r->points[e].vote.accuracy);
        nm += 100.0 * r->points[e].vote.nearest_accuracy;
        ab += 100.0 * r->points[e].vote.abstain_share;
      }
      double m = 0.0, ss = 0.0;
      for (double a : acc) m += a;
      m /= F;
      for (double a : acc) ss += (a - m) * (a - m);
      c.mean.push_back(m);
      c.sd.push_back(F > 1 ? std::sqrt(ss / (F - 1)) : 0.0);
      c.nearest_mean.push_back(nm / F);
      c.abstain_mean.push_back(ab / F);
      c.per_fold.push_back(acc);
    }
    for (const RunResult* r : rs) c.seconds += r->seconds;
    out.push_back(std::move(c));
  }
  if (!out.empty() && out[0].method == Method::Base) {
    const Curve& base = out[0];
    for (Curve& c : out) {
      MN_CHECK(c.epochs == base.epochs && c.per_fold[0].size() == base.per_fold[0].size(),
               "pair_selection: summary", method_label(c.method),
               " has other folds or epochs than BASE");
      if (c.method == Method::Base || base.per_fold[0].size() < 2) continue;
      for (size_t e = 0; e < c.epochs.size(); ++e)
        c.vs_base.push_back(paired_t_test(c.per_fold[e], base.per_fold[e]));
    }
  }
  return out;
}

namespace {
// The value after `"key":` in one of the driver's JSON lines (flat objects of
// numbers and plain strings; keys the harness adds are skipped); throws naming the file when it is missing.
std::string json_field(const std::string& line, const std::string& key, const std::string& path) {
  const std::string tag = "\"" + key + "\":";
  const size_t p = line.find(tag);
  MN_CHECK(p != std::string::npos, "pair_selection: --summarise", path, ": a line has no \"", key,
           "\"");
  size_t b = line.find_first_not_of(' ', p + tag.size()), e;
  MN_CHECK(b != std::string::npos, "pair_selection: --summarise", path, ": malformed \"", key, "\"");
  if (line[b] == '"') {
    e = line.find('"', ++b);
  } else {
    e = line.find_first_of(",}", b);
  }
  MN_CHECK(e != std::string::npos, "pair_selection: --summarise", path, ": malformed \"", key, "\"");
  return line.substr(b, e - b);
}
// A number of one of those lines; throws naming the file and the key when it is not one.
double json_number(const std::string& line, const std::string& key, const std::string& path) {
  const std::string v = json_field(line, key, path);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  MN_CHECK(!v.empty() && *end == '\0' && std::isfinite(x), "pair_selection: --summarise", path, ": \"", key,
           "\" is '", v, "', not a number (a damaged or foreign file?)");
  return x;
}
int64_t json_int(const std::string& line, const std::string& key, const std::string& path) {
  const double x = json_number(line, key, path);
  MN_CHECK(x == std::floor(x) && std::fabs(x) < 1e15, "pair_selection: --summarise", path, ": \"", key, "\" is ",
           x, ", not an integer (a damaged or foreign file?)");
  return static_cast<int64_t>(x);
}
}  // namespace

namespace {
// Every run of a metrics file, keyed (method, fold), with its lines.
std::map<std::pair<int, int>, RunResult> read_all_runs(const std::string& path, size_t* max_points,
                                                       std::map<std::pair<int, int>, std::string>* lines_of) {
  std::ifstream in(path);
  MN_CHECK(in.good(), "pair_selection: --summarise", "cannot open '", path, "'");
  std::map<std::pair<int, int>, RunResult> runs;  // (method, fold)
  *max_points = 0;
  size_t& max_pts = *max_points;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const std::string label = json_field(line, "method", path);
    int m = -1;
    for (int k = 0; k < kNumMethods; ++k)
      if (label == method_label(static_cast<Method>(k))) m = k;
    MN_CHECK(m >= 0, "pair_selection: --summarise", path, ": unknown method '", label, "'");
    const int fold = static_cast<int>(json_int(line, "fold", path));
    RunResult& r = runs[{m, fold}];
    r.method = static_cast<Method>(m);
    r.fold = fold;
    EvalPoint pt;
    pt.epoch = static_cast<int>(json_int(line, "epoch", path));
    pt.vote.accuracy = json_number(line, "accuracy", path);
    pt.vote.nearest_accuracy = json_number(line, "nearest_accuracy", path);
    pt.vote.abstain_share = json_number(line, "abstain_share", path);
    pt.train_loss = json_number(line, "train_loss", path);
    pt.genuine_pairs = json_int(line, "genuine_pairs", path);
    if (line.find("\"seconds\":") != std::string::npos)
      r.seconds = json_number(line, "seconds", path);
    r.points.push_back(pt);
    max_pts = std::max(max_pts, r.points.size());
    if (lines_of) (*lines_of)[{m, fold}] += line + "\n";
  }
  return runs;
}
}  // namespace

std::vector<RunResult> read_finished_runs(const std::string& path, std::string* kept_lines) {
  size_t max_points = 0;
  std::map<std::pair<int, int>, std::string> lines;
  auto runs = read_all_runs(path, &max_points, &lines);
  std::vector<RunResult> out;
  if (kept_lines) kept_lines->clear();
  for (auto& [key, r] : runs) {
    if (r.points.size() != max_points) continue;  // cut short (a kill while its lines were written)
    std::sort(r.points.begin(), r.points.end(),
              [](const EvalPoint& a, const EvalPoint& b) { return a.epoch < b.epoch; });
    if (kept_lines) *kept_lines += lines[key];
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<RunResult> read_runs_jsonl(const std::string& path, int* dropped) {
  size_t max_points = 0;
  auto runs = read_all_runs(path, &max_points, nullptr);
  std::set<int> methods, folds, incomplete;
  for (const auto& [key, r] : runs) {
    methods.insert(key.first);
    folds.insert(key.second);
  }
  for (int fold : folds)
    for (int m : methods) {
      auto it = runs.find({m, fold});
      if (it == runs.end() || it->second.points.size() != max_points) incomplete.insert(fold);
    }
  std::vector<RunResult> out;
  for (auto& [key, r] : runs) {
    if (incomplete.count(key.second)) continue;
    std::sort(r.points.begin(), r.points.end(),
              [](const EvalPoint& a, const EvalPoint& b) { return a.epoch < b.epoch; });
    out.push_back(std::move(r));
  }
  if (dropped) *dropped = static_cast<int>(incomplete.size());
  return out;
}

const std::vector<PaperRow>& paper_table_mnist() {
  // Martin et al. 2018, Table 2, MNIST; columns BASE, BASE*, DynE, DynE*, DynEE, DynEE*.
  static const std::vector<PaperRow> rows = {
      {25, {57.50, 29.19, 61.05, 27.04, 67.00, 29.37}, {false, false, false, false, false, false}},
      {50, {68.24, 52.96, 75.16, 59.24, 81.93, 69.09}, {false, false, false, false, true, false}},
      {75, {72.03, 63.47, 80.76, 72.78, 86.78, 83.12}, {false, false, false, false, true, false}},
      {100, {75.51, 70.74, 84.53, 82.21, 90.05, 88.92}, {false, false, false, false, true, false}}};
  return rows;
}

namespace {
std::string fmt(double v, int prec = 2) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}
int index_of_epoch(const Curve& c, int epoch) {
  for (size_t i = 0; i < c.epochs.size(); ++i)
    if (c.epochs[i] == epoch) return static_cast<int>(i);
  return -1;
}
bool significant(const Curve& c, int e, double alpha) {
  return !c.vs_base.empty() && c.vs_base[e].p_greater < alpha;
}
}  // namespace

std::string results_markdown(const std::vector<Curve>& curves, double alpha,
                             const std::string& header) {
  std::ostringstream md;
  md << header << "\n";
  md << "## Table 2, MNIST rows: ours (paper)\n\n"
     << "Test classification accuracy (%) by the prototype vote (Eqs. 4-5; a query with no "
     << "prototype within M counts as wrong), mean over folds. `*` = one-tailed paired t-test "
     << "against BASE at the same epoch, p < " << alpha << " (ours, over our folds; the "
     << "paper's marks as printed).\n\n| Training | epoch |";
  for (const Curve& c : curves) md << " " << method_label(c.method) << " |";
  md << "\n|---|---|";
  for (size_t i = 0; i < curves.size(); ++i) md << "---|";
  md << "\n";
  const int total = curves.empty() || curves[0].epochs.empty() ? 0 : curves[0].epochs.back();
  for (const PaperRow& row : paper_table_mnist()) {
    // The paper's 25/50/75/100 % rows, scaled to our epoch count.
    const int epoch = total * row.epoch / 100;
    md << "| " << row.epoch << " % | " << epoch << " |";
    for (const Curve& c : curves) {
      const int e = index_of_epoch(c, epoch);
      const int mi = static_cast<int>(c.method);
      md << " ";
      if (e >= 0) md << fmt(c.mean[e]) << (significant(c, e, alpha) ? "*" : "");
      else md << "-";
      md << " (" << fmt(row.acc[mi]) << (row.significant[mi] ? "*" : "") << ") |";
    }
    md << "\n";
  }
  md << "\n## Every evaluation: mean ± sd over folds (%); p = one-tailed paired t-test vs BASE "
        "(greater)\n\n| epoch |";
  for (const Curve& c : curves) md << " " << method_label(c.method) << " |";
  md << "\n|---|";
  for (size_t i = 0; i < curves.size(); ++i) md << "---|";
  md << "\n";
  for (size_t e = 0; !curves.empty() && e < curves[0].epochs.size(); ++e) {
    md << "| " << curves[0].epochs[e] << " |";
    for (const Curve& c : curves) {
      md << " " << fmt(c.mean[e]) << " ± " << fmt(c.sd[e]);
      if (!c.vs_base.empty()) md << " (p " << fmt(c.vs_base[e].p_greater, 3) << ")";
      md << " |";
    }
    md << "\n";
  }
  md << "\n## Nearest prototype without the margin rule, and abstentions, at the last epoch\n\n"
        "| method | vote accuracy % | nearest-prototype accuracy % | queries with no prototype "
        "within M % | training time (s, summed over folds) |\n|---|---|---|---|---|\n";
  for (const Curve& c : curves) {
    const size_t e = c.epochs.size() - 1;
    md << "| " << method_label(c.method) << " | " << fmt(c.mean[e]) << " | "
       << fmt(c.nearest_mean[e]) << " | " << fmt(c.abstain_mean[e]) << " | " << fmt(c.seconds, 1)
       << " |\n";
  }
  return md.str();
}

std::string results_json(const std::vector<Curve>& curves, double alpha,
                         const std::string& config_json) {
  exp::Json j;
  j["config"] = exp::Json::parse(config_json, nullptr, false);
  j["alpha"] = alpha;
  j["methods"] = exp::Json::array();
  auto arr = [](const std::vector<double>& v) {
    exp::Json a = exp::Json::array();
    for (double x : v) a.push_back(exp::metric_number(x));
    return a;
  };
  for (const Curve& c : curves) {
    exp::Json m;
    m["method"] = method_label(c.method);
    m["epochs"] = c.epochs;
    m["mean"] = arr(c.mean);
    m["sd"] = arr(c.sd);
    m["nearest_mean"] = arr(c.nearest_mean);
    m["abstain_mean"] = arr(c.abstain_mean);
    m["per_fold"] = exp::Json::array();
    for (const auto& f : c.per_fold) m["per_fold"].push_back(arr(f));
    m["t_vs_base"] = exp::Json::array();
    for (const TTest& t : c.vs_base)
      m["t_vs_base"].push_back({{"t", exp::metric_number(t.t)},
                                {"p_greater", exp::metric_number(t.p_greater)},
                                {"p_less", exp::metric_number(t.p_less)}});
    m["seconds"] = exp::metric_number(c.seconds);
    j["methods"].push_back(m);
  }
  return j.dump(1) + "\n";
}

bool plot_figure(const std::string& png_path, const std::vector<Curve>& curves) {
  const std::string dat = png_path + ".dat", gp = png_path + ".gp";
  {
    std::ofstream d(dat);
    for (const Curve& c : curves) {
      d << "# " << method_label(c.method) << ": epoch mean sd\n";
      for (size_t i = 0; i < c.epochs.size(); ++i)
        d << c.epochs[i] << " " << c.mean[i] << " " << c.sd[i] << "\n";
      d << "\n\n";
    }
  }
  std::ostringstream g;
  g << "set terminal pngcairo size 960,600 noenhanced\nset output '" << png_path << "'\n"
    << "set title 'Informed pair selection, MNIST (1 % budget): test accuracy, mean over folds, "
       "band = +-1 sd'\nset xlabel 'training epochs'\nset ylabel 'classification accuracy (%)'\n"
    << "set grid\nset key outside below horizontal\nset xrange [0:*]\nset style fill "
       "transparent solid 0.15 noborder\nplot ";
  for (size_t s = 0; s < curves.size(); ++s) {
    const std::string lc = "lc " + std::to_string(s + 1);
    g << (s ? ", " : "") << "'" << dat << "' index " << s << " using 1:($2-$3):($2+$3) with "
      << "filledcurves " << lc << " notitle, '" << dat << "' index " << s
      << " using 1:2 with linespoints " << lc << " dt " << (method_ordered(curves[s].method) ? 2 : 1)
      << " title '" << method_label(curves[s].method) << "'";
  }
  g << "\n";
  exp::write_file_atomic(gp, g.str());
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return false;
  const std::string cmd = "gnuplot '" + gp + "' 2>/dev/null";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace mn::pairsel
