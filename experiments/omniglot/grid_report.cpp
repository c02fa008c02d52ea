// omniglot_grid's report (grid.h): results.md, results.json and Figures 3-7.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/common/grid_util.h"
#include "experiments/common/reproduction.h"
#include "experiments/omniglot/grid.h"
#include "runtime/error.h"

namespace mn::exp::omniglot_grid {
namespace fs = std::filesystem;
namespace {

void load(Cell& c) {
  c.summary = read_json_file(c.dir + "/summary.json");
  c.val_curve.clear();
  std::ifstream in(c.dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const Json j = Json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("val_one_shot_percent") && j["val_one_shot_percent"].is_number())
      c.val_curve.push_back(j["val_one_shot_percent"].get<double>());
  }
}
bool finished(const Cell& c) { return c.summary.is_object() && c.summary.contains("best_val_one_shot_percent"); }

double num(const Json& j, std::initializer_list<const char*> path) {
  const Json* p = &j;
  for (const char* k : path) {
    if (!p->is_object() || !p->contains(k)) return NAN;
    p = &(*p)[k];
  }
  return p->is_number() ? p->get<double>() : NAN;
}

using Stat = SampleStats;
Stat stat(const std::vector<double>& v) { return sample_stats(v); }

std::string fmt(double v, int prec = 2) {
  if (!std::isfinite(v)) return "–";
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}
std::string fmt_stat(const Stat& s) {
  if (s.n == 0) return "–";
  return fmt(s.mean) + (s.n > 1 ? " ± " + fmt(s.sd) : "") + " (n=" + std::to_string(s.n) + ")";
}

// The row's validation value per finished seed: the best validation one-shot accuracy,
// or for a shortened row reported through a longer run (Figure 4's joint 15-epoch line)
// the best over the epochs up to its mark.
std::vector<double> row_values(const GridRow& r, const Scale& s, const std::vector<Cell>& cells) {
  const GridRow& rr = run_row(r);
  std::vector<double> v;
  for (const Cell& c : cells) {
    if (c.row->id != rr.id || !finished(c)) continue;
    if (r.paper_epochs != rr.paper_epochs) {
      const size_t mark = std::min(c.val_curve.size(), static_cast<size_t>(row_epochs(r, s)));
      double best = NAN;
      for (size_t e = 0; e < mark; ++e) best = std::isfinite(best) ? std::max(best, c.val_curve[e]) : c.val_curve[e];
      v.push_back(best);
    } else {
      v.push_back(num(c.summary, {"best_val_one_shot_percent"}));
    }
  }
  return v;
}
// Lake's trials are scored once per run, with the run's best-validation model: a row
// reported through a longer run up to an earlier mark (share-joint-15) has no Lake score.
std::vector<double> lake_values(const GridRow& r, const std::vector<Cell>& cells) {
  std::vector<double> v;
  if (r.paper_epochs != run_row(r).paper_epochs) return v;
  for (const Cell& c : cells)
    if (c.row->id == run_row(r).id && finished(c)) v.push_back(num(c.summary, {"lake", "accuracy_percent"}));
  return v;
}

// Reproduction counted both ways (experiments/common/reproduction.h): within the
// paper's value +- our sd, or +- 2 points with one seed.
std::string verdict(double paper, const Stat& ours) {
  const Repro r = compare_with_paper(paper, ours, 2.0);
  return r == Repro::NotRun || r == Repro::NoPaper ? "–" : repro_name(r);
}

std::vector<std::string> groups() {
  std::vector<std::string> g;
  for (const GridRow& r : grid_rows())
    if (std::find(g.begin(), g.end(), r.group) == g.end()) g.push_back(r.group);
  return g;
}

// One claim of the paper tested at this scale: "holds", "fails", "within the spread"
// or "not run".
struct Claim {
  std::string text, result, numbers;
};

}  // namespace

// Each claim is a conjunction of orderings "a above b"; an ordering counts only when the
// difference of the means exceeds the larger sd of the two rows, and at least 2 points
// (the verdicts' tolerance with one seed): a row 0.2 points above another with sds of 1-2
// points is not evidence either way.
int clear_order(const SampleStats& a, const SampleStats& b) {
  if (a.n == 0 || b.n == 0 || !std::isfinite(a.mean) || !std::isfinite(b.mean)) return 0;
  double tol = 2.0;
  for (const SampleStats* s : {&a, &b})
    if (s->n > 1 && std::isfinite(s->sd)) tol = std::max(tol, s->sd);
  const double d = a.mean - b.mean;
  return d > tol ? 1 : d < -tol ? -1 : 0;
}

namespace {

struct Above {
  Stat a, b;
};
std::string claim_result(const std::vector<Above>& ordering) {
  bool all_clear = true;
  for (const Above& o : ordering) {
    if (o.a.n == 0 || o.b.n == 0) return "not run";
    const int c = clear_order(o.a, o.b);
    if (c < 0) return "fails";
    if (c == 0) all_clear = false;
  }
  return all_clear ? "holds" : "within the spread";
}

std::vector<Claim> claims(const Scale& s, const std::vector<Cell>& cells) {
  auto st = [&](const char* id) { return stat(row_values(row_by_id(id), s, cells)); };
  std::vector<Claim> out;
  auto add = [&](std::string text, const std::vector<Above>& ordering, std::string numbers) {
    out.push_back({std::move(text), claim_result(ordering), std::move(numbers)});
  };
  const Stat g = st("t1-global"), gt = st("t1-global-triplet"), k = st("t1-kumar"), sc = st("t1-schroff"),
             sm = st("t1-softmax"), hp = st("t1-hard-positive");
  add("global and global + triplet losses beat Kumar's and Schroff's", {{g, k}, {g, sc}, {gt, k}, {gt, sc}},
      "global " + fmt(g.mean) + ", global + triplet " + fmt(gt.mean) + ", Kumar " + fmt(k.mean) + ", Schroff " +
          fmt(sc.mean));
  add("the softmax ratio loss is the worst of Table 1", {{g, sm}, {gt, sm}, {k, sm}, {sc, sm}, {hp, sm}},
      "softmax " + fmt(sm.mean));
  add("hard-positive mining helps Kumar's loss", {{hp, k}}, fmt(hp.mean) + " vs " + fmt(k.mean));
  const Stat sv = st("t2-siamese"), tv = g;
  const Stat sl = stat(lake_values(row_by_id("t2-siamese"), cells)), tl = stat(lake_values(row_by_id("t1-global"), cells));
  add("the triplet net beats the siamese net (validation and Lake's trials)", {{tv, sv}, {tl, sl}},
      "validation " + fmt(tv.mean) + " vs " + fmt(sv.mean) + ", Lake " + fmt(tl.mean) + " vs " + fmt(sl.mean));
  // The gap as validation minus Lake's trials (what a net loses from one to the other), one
  // value per net: compared with the 2-point tolerance.
  auto gap = [](const Stat& v, const Stat& l) {
    Stat d;
    d.n = std::min(v.n, l.n);
    d.mean = v.mean - l.mean;
    return d;
  };
  add("the validation-to-evaluation gap (validation − Lake) is smaller for the triplet net",
      {{gap(sv, sl), gap(tv, tl)}},
      "triplet " + fmt(tv.mean - tl.mean) + ", siamese " + fmt(sv.mean - sl.mean) + " points");
  const Stat dj = st("share-disjoint");
  Stat k10 = k;
  k10.mean -= 10;  // "far below": at least 10 points under full sharing
  add("a disjoint anchor branch fails (far below full sharing)", {{k10, dj}}, fmt(dj.mean) + " vs " + fmt(k.mean));
  const Stat d1 = st("drop-0.1"), d3 = st("drop-0.3"), d5 = st("drop-0.5"), d7 = st("drop-0.7"), d9 = st("drop-0.9");
  add("dropout 0.1 helps the default model", {{d1, k}}, fmt(d1.mean) + " vs " + fmt(k.mean));
  add("more dropout is worse (0.1 > 0.3 > 0.5 > 0.7 > 0.9)", {{d1, d3}, {d3, d5}, {d5, d7}, {d7, d9}},
      fmt(d1.mean) + ", " + fmt(d3.mean) + ", " + fmt(d5.mean) + ", " + fmt(d7.mean) + ", " + fmt(d9.mean));
  const Stat ni = st("norm-input"), nb = st("norm-bn"), nib = st("norm-input-bn"), nl = st("norm-lrn"),
             nli = st("norm-lrn-input");
  add("no normalisation beats the default; input norm + BN is the worst",
      {{k, ni}, {k, nb}, {k, nib}, {k, nl}, {k, nli}, {ni, nib}, {nb, nib}, {nl, nib}, {nli, nib}},
      "default " + fmt(k.mean) + "; input " + fmt(ni.mean) + ", BN " + fmt(nb.mean) + ", input + BN " +
          fmt(nib.mean) + ", LRN " + fmt(nl.mean) + ", LRN + input " + fmt(nli.mean));
  const Stat ae = st("act-elu"), ase = st("act-selu"), age = st("act-global-elu"), agte = st("act-gt-elu"),
             ade = st("act-dropout-elu");
  add("ELU beats ReLU and SELU on the default model", {{ae, k}, {ae, ase}},
      "ELU " + fmt(ae.mean) + ", SELU " + fmt(ase.mean) + ", ReLU " + fmt(k.mean));
  add("ReLU beats ELU with the global, global + triplet losses and dropout 0.1", {{g, age}, {gt, agte}, {d1, ade}},
      "global " + fmt(g.mean) + " vs " + fmt(age.mean) + ", global + triplet " + fmt(gt.mean) + " vs " +
          fmt(agte.mean) + ", dropout " + fmt(d1.mean) + " vs " + fmt(ade.mean));
  const Stat hn = st("samp-hard-negative");
  add("hard (semi-hard) negative sampling ends below random", {{k, hn}}, fmt(hn.mean) + " vs " + fmt(k.mean));
  return out;
}

// Mean and sd of the validation curves of a row's seeds, epoch by epoch (up to `limit`).
void mean_curve(const GridRow& r, const std::vector<Cell>& cells, size_t limit, std::vector<double>& mean,
                std::vector<double>& sd) {
  std::vector<std::vector<double>> per_epoch;
  for (const Cell& c : cells) {
    if (c.row->id != run_row(r).id || c.val_curve.empty()) continue;
    for (size_t e = 0; e < std::min(limit, c.val_curve.size()); ++e) {
      if (per_epoch.size() <= e) per_epoch.resize(e + 1);
      per_epoch[e].push_back(c.val_curve[e]);
    }
  }
  mean.clear(), sd.clear();
  for (const auto& v : per_epoch) {
    const Stat s = stat(v);
    mean.push_back(s.mean);
    sd.push_back(std::isfinite(s.sd) ? s.sd : 0.0);
  }
}

// A gnuplot single-quoted string: backslashes are literal there, a quote is doubled.
std::string gp_quote(const std::string& t) {
  std::string q = "'";
  for (char c : t) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

// Figure N: the validation one-shot curves of the rows the paper draws in it, mean of
// the seeds with a +- sd band. Returns the PNG's name in `out`, or "" with `why` saying
// why there is none: no row of it has a curve yet, gnuplot is missing, or gnuplot
// failed (its message).
// The x axis: the paper's epochs (0-50; Figure 4: 0-15) at a scale of the paper's length;
// a shorter scale's own epochs, said so in the label. Integer ticks either way.
std::string x_axis(int n, const Scale& s) {
  const int last = n == 4 ? row_epochs(row_by_id("share-disjoint-hp-15"), s) : s.epochs;
  const std::string label = s.epochs == 50 ? "epoch"
                                           : "epoch at the " + s.name + " scale (" + std::to_string(s.epochs) +
                                                 " for the paper's 50)";
  return "set xlabel " + gp_quote(label) + "\nset xrange [0:" + std::to_string(last) + "]\nset xtics " +
         std::to_string(last <= 15 ? 1 : 5) + "\n";
}

std::string figure(const std::string& out, int n, const Scale& s, const std::vector<Cell>& cells, std::string& why) {
  const std::vector<const GridRow*> lines = figure_lines(n);
  const std::string png = "figure" + std::to_string(n) + ".png", dat = out + "/figure" + std::to_string(n) + ".dat";
  std::ofstream d(dat);
  std::vector<std::string> plots;
  int block = 0;
  for (const GridRow* r : lines) {
    // Figure 4 covers the first 15 of the paper's epochs.
    const size_t limit = n == 4 ? static_cast<size_t>(row_epochs(row_by_id("share-disjoint-hp-15"), s)) : SIZE_MAX;
    std::vector<double> mean, sd;
    mean_curve(*r, cells, limit, mean, sd);
    if (mean.empty()) continue;
    for (size_t e = 0; e < mean.size(); ++e) d << e + 1 << " " << mean[e] << " " << mean[e] - sd[e] << " " << mean[e] + sd[e] << "\n";
    d << "\n\n";
    const std::string t = r->label;
    plots.push_back(gp_quote(dat) + " index " + std::to_string(block) + " using 1:3:4 with filledcurves fs transparent solid 0.15 lc " +
                    std::to_string(block + 1) + " notitle");
    plots.push_back(gp_quote(dat) + " index " + std::to_string(block) + " using 1:2 with linespoints lw 2 lc " +
                    std::to_string(block + 1) + " title " + gp_quote(t));
    ++block;
  }
  d.close();
  why = plots.empty() ? "no curves yet" : std::system("command -v gnuplot >/dev/null 2>&1") != 0 ? "gnuplot missing" : "";
  if (!why.empty()) {
    std::remove(dat.c_str());
    return "";
  }
  const std::string gp = out + "/figure" + std::to_string(n) + ".gp";
  std::ofstream g(gp);
  g << "set terminal pngcairo size 900,560\nset output " << gp_quote(out + "/" + png) << "\n"
    << "set title " << gp_quote("Figure " + std::to_string(n) + " at the " + s.name +
                                " scale: one-shot validation accuracy (mean, +- sd band)") << "\n"
    << x_axis(n, s) << "set ylabel 'one-shot validation accuracy (%)'\nset yrange [0:100]\nset key below\n"
    << "set grid\nplot ";
  for (size_t i = 0; i < plots.size(); ++i) g << (i ? ", \\\n     " : "") << plots[i];
  g << "\n";
  g.close();
  const std::string log = gp + ".log";
  const bool ok = std::system(("gnuplot '" + gp + "' 2>'" + log + "'").c_str()) == 0 &&
                  fs::exists(out + "/" + png) && fs::file_size(out + "/" + png) > 0;
  if (!ok) {  // the script and data stay for a look; no empty PNG is left behind
    std::ifstream in(log);
    std::string msg((std::istreambuf_iterator<char>(in)), {});
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    why = "gnuplot failed on `" + gp + "`: " + msg;
    std::fprintf(stderr, "omniglot_grid: warning: Figure %d: %s\n", n, why.c_str());
    std::remove((out + "/" + png).c_str());
    return "";
  }
  std::remove(log.c_str());
  std::remove(gp.c_str());
  std::remove(dat.c_str());
  return png;
}

std::string tables_markdown(const Scale& s, const std::vector<Cell>& cells, Json& rj, ReproCount& all) {
  std::ostringstream o;
  for (const std::string& g : groups()) {
    o << "### " << g << "\n\n| row | paper val % | ours val % (mean ± sd, n) | ours − paper | verdict | Lake's 400 % | "
      << (g == "Table 2" ? "paper eval % | " : "") << "\n|---|---:|---:|---:|---|---:|" << (g == "Table 2" ? "---:|" : "")
      << "\n";
    std::vector<double> paper, ours;
    ReproCount count;
    for (const GridRow& r : grid_rows()) {
      if (r.group != g) continue;
      const Stat v = stat(row_values(r, s, cells)), l = stat(lake_values(r, cells));
      const std::string name = r.label + (r.alias.empty() ? "" : " (= " + r.alias + ")") + " `" + r.id + "`";
      o << "| " << name << " | " << (r.paper_val >= 0 ? fmt(r.paper_val) : "–") << " | " << fmt_stat(v) << " | "
        << (r.paper_val >= 0 && v.n ? fmt(v.mean - r.paper_val) : "–") << " | " << verdict(r.paper_val, v) << " | "
        << fmt_stat(l) << " |";
      if (g == "Table 2") o << " " << (r.paper_eval >= 0 ? fmt(r.paper_eval) : "–") << " |";
      o << "\n";
      if (r.paper_val >= 0 && v.n) paper.push_back(r.paper_val), ours.push_back(v.mean);
      count.add(compare_with_paper(r.paper_val, v, 2.0));
      all.add(compare_with_paper(r.paper_val, v, 2.0));
      Json jr;
      jr["group"] = g, jr["label"] = r.label, jr["paper_val"] = r.paper_val, jr["ours_val_mean"] = v.mean;
      jr["ours_val_sd"] = v.sd, jr["n"] = v.n, jr["lake_mean"] = l.mean, jr["verdict"] = verdict(r.paper_val, v);
      rj["rows"][r.id] = jr;
    }
    const double tau = kendall_tau(paper, ours);
    o << "\nKendall's τ of our ranking against the paper's (" << paper.size() << " rows): " << fmt(tau)
      << "; against the paper's values: " << count.line() << "\n\n";
    rj["kendall_tau"][g] = tau;
  }
  return o.str();
}

// What the paper's absolute numbers mean at the scale.
std::string scale_reading(const Scale& s) {
  if (s.name == "full") return "This is the paper's protocol: its numbers are the targets.";
  if (s.name == "paper-length")
    return "This scale trains for the paper's length (1.25 M triplets) with the paper's procedure, on a smaller net "
           "(conv4 on 28x28 with a 128-d sigmoid head, ~0.12 M parameters, against Koch's ~39 M on 105x105): the "
           "paper's numbers are compared as they are, and the rankings (Kendall's τ) and the claims say whether its "
           "findings hold for a converged model of another size.";
  return "At the CPU scale the paper's absolute numbers are not targets (a smaller net trained on 4.8 % of its "
         "triplets): read the rankings (Kendall's τ) and the claims.";
}

// The claims and the rankings beside another grid's (its results.json): which findings
// change with the training length.
std::string two_lengths_markdown(const std::string& other_dir, const Scale& s, Json& rj) {
  const Json other = read_json_file(other_dir + "/results.json");
  MN_CHECK(other.is_object() && other.contains("claims"), "--compare-with ", other_dir,
           ": no results.json with claims there (give another omniglot_grid folder)");
  const std::string them = other.value("scale", std::string("other"));
  std::ostringstream o;
  o << "\n## The claims at two lengths\n\nThe same claims judged by the same rule on the `" << them << "` grid (`"
    << other_dir << "`) and on this one (`" << s.name << "`).\n\n| claim | " << them << " | " << s.name
    << " | changed |\n|---|---|---|---|\n";
  for (const auto& [text, result] : rj["claims"].items()) {
    const std::string mine = result.get<std::string>();
    const std::string theirs = other["claims"].contains(text) ? other["claims"][text].get<std::string>() : "–";
    const bool comparable = mine != "not run" && theirs != "not run" && theirs != "–";
    o << "| " << text << " | " << theirs << " | " << mine << " | "
      << (!comparable ? "–" : mine == theirs ? "no" : "**yes**") << " |\n";
  }
  o << "\n| table | Kendall's τ, " << them << " | Kendall's τ, " << s.name << " |\n|---|---:|---:|\n";
  for (const auto& [group, tau] : rj["kendall_tau"].items()) {
    const double t2 = other.contains("kendall_tau") && other["kendall_tau"].contains(group) &&
                              other["kendall_tau"][group].is_number()
                          ? other["kendall_tau"][group].get<double>()
                          : NAN;
    o << "| " << group << " | " << fmt(t2) << " | " << fmt(tau.is_number() ? tau.get<double>() : NAN) << " |\n";
  }
  if (other.contains("verdicts"))
    o << "\nRows within / above / below the paper: " << them << " " << other["verdicts"].value("within", 0) << " / "
      << other["verdicts"].value("above", 0) << " / " << other["verdicts"].value("below", 0) << "; " << s.name << " "
      << rj["verdicts"].value("within", 0) << " / " << rj["verdicts"].value("above", 0) << " / "
      << rj["verdicts"].value("below", 0) << ".\n";
  return o.str();
}

std::string cells_markdown(const std::vector<Cell>& cells) {
  std::ostringstream o;
  o << "| cell | best val % (epoch) | Lake % | train s | commit | machine | command |\n|---|---:|---:|---:|---|---|---|\n";
  std::vector<ProvenanceRow> rows;
  for (const Cell& c : cells) {
    if (!finished(c)) {
      o << "| " << c.row->id << "/seed" << c.seed << " | not finished | | | | | |\n";
      continue;
    }
    const ProvenanceRow p = provenance_row(c.summary);
    rows.push_back(p);
    o << "| " << c.row->id << "/seed" << c.seed << " | " << fmt(num(c.summary, {"best_val_one_shot_percent"}))
      << " (" << fmt(num(c.summary, {"best_epoch"}), 0) << ") | " << fmt(num(c.summary, {"lake", "accuracy_percent"}))
      << " | " << fmt(num(c.summary, {"train_seconds"}), 0) << " | " << p.commit << " | " << p.machine << " | `"
      << p.command << "` |\n";
  }
  return mixed_commits_note(rows) + o.str();
}

}  // namespace

// The rows drawn in Figure N, one per set of runs: a row and its alias in the same figure
// (t1-kumar and share-full in Figure 3) are one line, named by the alias -- the figure's
// own words for it ("Full share", "Random", "Default").
std::vector<const GridRow*> figure_lines(int n) {
  std::vector<const GridRow*> lines;
  for (const GridRow& r : grid_rows()) {
    if (std::find(r.figures.begin(), r.figures.end(), n) == r.figures.end()) continue;
    auto same = std::find_if(lines.begin(), lines.end(), [&](const GridRow* l) { return run_row(*l).id == run_row(r).id; });
    if (same == lines.end()) lines.push_back(&r);
    else if (!r.alias.empty()) *same = &r;
  }
  if (n == 4) lines.push_back(&row_by_id("share-joint-15"));  // the full-share line up to the 15-epoch mark
  return lines;
}

double kendall_tau(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  double conc = 0, disc = 0, ta = 0, tb = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      const double x = a[i] - a[j], y = b[i] - b[j];
      if (x == 0 && y == 0) continue;
      if (x == 0) ++ta;
      else if (y == 0) ++tb;
      else if ((x > 0) == (y > 0)) ++conc;
      else ++disc;
    }
  const double denom = std::sqrt((conc + disc + ta) * (conc + disc + tb));
  return denom > 0 ? (conc - disc) / denom : NAN;
}

void write_report(const std::string& out, const Scale& s, std::vector<Cell>& cells, const std::string& command,
                  const std::string& compare_dir) {
  for (Cell& c : cells) load(c);
  Json rj;
  rj["scale"] = s.name;
  rj["command"] = command;
  std::ostringstream md;
  md << "# The Omniglot study's tables and ablations, " << s.name << " scale\n\n"
     << "Generated by `omniglot_grid` (`experiments/omniglot/grid*.cpp`) from the runs below it; rerun with `"
     << command << (command.find(" --report-only") == std::string::npos ? " --report-only" : "")
     << "` after adding runs. Scale: " << s.description << ".\n\n"
     << "Values are the best one-shot validation accuracy over the run's epochs (320 20-way tasks of the validation "
        "alphabets, as the paper's tables), mean ± sd over seeds; Lake's 400 within-alphabet trials are scored once "
        "per run with the best-validation model. The verdict counts both ways: within the paper's value ± our sd "
        "(± 2 points with one seed), else above or below. " << scale_reading(s) << "\n\n"
     << "Kumar's loss is Kumar et al.'s 1 − d(a,n)/(d(a,p)+m); the paper prints it with d(a,p) and d(a,n) swapped, "
        "which rewards wrongly ordered triplets and cannot give its own 74.38 % (`kernels/losses.h`).\n\n";
  const std::string notes = out + "/notes.md";
  if (fs::exists(notes)) {
    std::ifstream in(notes);
    md << in.rdbuf() << "\n\n";
  }
  ReproCount all;
  const std::string tables = tables_markdown(s, cells, rj, all);
  md << "## Tables and ablations\n\nEvery row with a paper number and a finished run, counted both ways: " << all.line()
     << ".\n\n" << tables;
  rj["verdicts"] = {{"within", all.within}, {"above", all.above}, {"below", all.below}};
  md << "## The paper's claims at this scale\n\nA claim holds when every ordering it states is clear: the means differ by more "
        "than the larger sd of the two rows and by at least 2 points; \"within the spread\" when none goes the other "
        "way clearly but some are not clear; \"fails\" when one goes clearly the other way.\n\n"
        "| claim | result | numbers |\n|---|---|---|\n";
  for (const Claim& c : claims(s, cells)) {
    md << "| " << c.text << " | " << c.result << " | " << c.numbers << " |\n";
    rj["claims"][c.text] = c.result;
  }
  if (!compare_dir.empty()) md << two_lengths_markdown(compare_dir, s, rj);
  md << "\n## Figures\n\n";
  for (int n = 3; n <= 7; ++n) {
    std::string why;
    const std::string png = figure(out, n, s, cells, why);
    if (!png.empty()) md << "![Figure " << n << "](" << png << ")\n\n";
    else md << "Figure " << n << ": " << why << ".\n\n";
  }
  md << "## Cells (commit, machine and command of each run)\n\n" << cells_markdown(cells);
  std::ofstream(out + "/results.md") << md.str();
  std::ofstream(out + "/results.json") << rj.dump(2) << "\n";
}

}  // namespace mn::exp::omniglot_grid
