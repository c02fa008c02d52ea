// Lake's one-shot runs: parsing, loading, the position-independent scoring
// harness, and the Modified Hausdorff Distance baseline.
#include "data/lake_runs.h"
#include "data/file_io.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "data/image_io.h"
#include "runtime/parallel.h"

namespace fs = std::filesystem;

namespace mn::data {

namespace {
// Loads the run's images (queries and candidates together) as two stacks. The
// expected size is the one most of the run's images have, so the error names
// the odd image out: taking the first image's size blamed every other file
// when the first one was wrong.
void load_run_images(const std::string& root, LakeRun& r) {
  std::vector<std::string> files = r.query_files;
  files.insert(files.end(), r.candidate_files.begin(), r.candidate_files.end());
  std::vector<Tensor> imgs;
  std::map<std::pair<int64_t, int64_t>, int> count;
  for (const auto& f : files) {
    imgs.push_back(load_image_u8((fs::path(root) / f).string()));
    ++count[{imgs.back().size(0), imgs.back().size(1)}];
  }
  std::pair<int64_t, int64_t> hw{0, 0};
  int best = 0;
  for (const auto& [k, c] : count)
    if (c > best) best = c, hw = k;
  const int64_t H = hw.first, W = hw.second;  // (lambdas cannot capture structured bindings in C++17)
  for (size_t i = 0; i < imgs.size(); ++i) {
    MN_DATA_CHECK(imgs[i].size(0) == H && imgs[i].size(1) == W, "lake runs: '",
                  (fs::path(root) / files[i]).string(), "': wrong image size ", imgs[i].size(0),
                  "x", imgs[i].size(1), " (H x W), while ", best, " of the run's ", imgs.size(),
                  " images are ", H, "x", W, ": replace this image");
  }
  auto stack = [&](size_t from, size_t n) {
    Tensor out = Tensor::empty({static_cast<int64_t>(n), H, W}, DType::U8);
    for (size_t i = 0; i < n; ++i)
      std::copy_n(imgs[from + i].data<uint8_t>(), H * W, out.data<uint8_t>() + i * H * W);
    return out;
  };
  r.queries = stack(0, r.query_files.size());
  r.candidates = stack(r.query_files.size(), r.candidate_files.size());
}
}  // namespace

LakeRun parse_lake_run_labels(const std::string& text, const std::string& labels,
                              const std::string& rn) {
  std::istringstream f(text);
  std::vector<std::pair<std::string, std::string>> pairs;
  std::string line;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::istringstream ls(line);
    std::string q, c, extra;
    ls >> q >> c;
    MN_DATA_CHECK(!q.empty() && !c.empty() && !(ls >> extra), "lake runs: '", labels, "' line ",
             lineno, ": expected two paths, got '", line, "'");
    MN_DATA_CHECK(q.rfind(rn + "/test/", 0) == 0 && c.rfind(rn + "/training/", 0) == 0,
             "lake runs: '", labels, "' line ", lineno, ": paths must be ", rn, "/test/... ",
             rn, "/training/..., got '", line, "'");
    MN_DATA_CHECK(q.find("..") == std::string::npos && c.find("..") == std::string::npos,
                  "lake runs: '", labels, "' line ", lineno,
                  ": paths may not contain '..' (they must stay inside the run folder)");
    pairs.emplace_back(q, c);
  }
  MN_DATA_CHECK(!pairs.empty(), "lake runs: '", labels, "' holds no trials");
  LakeRun r;
  int64_t run_no = 0;
  MN_DATA_CHECK(rn.size() > 3 && rn.compare(0, 3, "run") == 0 &&
                    parse_int_in_range(rn.substr(3), 1, 9999, &run_no),
                "lake runs: folder '", rn, "' of '", labels,
                "' is not named runNN (NN a run number): rename or remove it");
  r.run = static_cast<int>(run_no);
  for (const auto& p : pairs) {
    r.query_files.push_back(p.first);
    r.candidate_files.push_back(p.second);
  }
  std::sort(r.query_files.begin(), r.query_files.end());
  std::sort(r.candidate_files.begin(), r.candidate_files.end());
  MN_DATA_CHECK(std::adjacent_find(r.query_files.begin(), r.query_files.end()) == r.query_files.end() &&
               std::adjacent_find(r.candidate_files.begin(), r.candidate_files.end()) ==
                   r.candidate_files.end(),
           "lake runs: '", labels, "': a query or candidate appears twice");
  r.answer.resize(pairs.size());
  for (const auto& p : pairs) {
    size_t qi = std::lower_bound(r.query_files.begin(), r.query_files.end(), p.first) -
                r.query_files.begin();
    size_t ci = std::lower_bound(r.candidate_files.begin(), r.candidate_files.end(), p.second) -
                r.candidate_files.begin();
    r.answer[qi] = static_cast<int32_t>(ci);
  }
  return r;
}

std::vector<LakeRun> load_lake_runs(const std::string& dir, int expect_runs) {
  std::error_code ec;
  MN_DATA_CHECK(fs::is_directory(dir, ec), "lake runs: missing folder '", dir,
                "' (Omniglot's all_runs/; fetch it with data/fetch.sh get omniglot)");
  std::vector<std::string> run_names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string n = it->path().filename().string();
    if (it->is_directory(ec) && n.rfind("run", 0) == 0) run_names.push_back(n);
  }
  std::sort(run_names.begin(), run_names.end());
  MN_DATA_CHECK(expect_runs <= 0 || static_cast<int>(run_names.size()) == expect_runs, "lake runs: '",
           dir, "' holds ", run_names.size(), " run folders, expected ", expect_runs);
  std::vector<LakeRun> runs;
  for (const auto& rn : run_names) {
    const std::string labels = (fs::path(dir) / rn / "class_labels.txt").string();
    // read_regular_file refuses a directory or FIFO instead of reading it.
    const std::vector<uint8_t> bytes = read_regular_file(labels, "lake runs");
    LakeRun r = parse_lake_run_labels(std::string(bytes.begin(), bytes.end()), labels, rn);
    load_run_images(dir, r);
    runs.push_back(std::move(r));
  }
  return runs;
}

double score_trial(const double* row, int64_t n, int64_t truth, ScoreKind kind, bool* tied) {
  MN_DATA_CHECK(truth >= 0 && truth < n, "score_trial: true index ", truth, " out of range [0, ", n, ")");
  const double t = row[truth];
  MN_DATA_CHECK(!std::isnan(t), "score_trial: score of the true candidate is NaN");
  int64_t better = 0, ties = 0;
  for (int64_t j = 0; j < n; ++j) {
    if (j == truth) continue;
    const double v = row[j];
    // A NaN candidate counts as better (pessimistic): a broken score cannot help.
    const bool b = std::isnan(v) || (kind == ScoreKind::Cost ? v < t : v > t);
    if (b) ++better;
    else if (v == t) ++ties;
  }
  if (tied) *tied = better == 0 && ties > 0;
  return better > 0 ? 0.0 : 1.0 / static_cast<double>(1 + ties);
}

void accumulate_group(const std::vector<double>& m, int64_t Q, int64_t C,
                      const std::vector<int32_t>& answer, ScoreKind kind, OneShotResult& r) {
  MN_DATA_CHECK(static_cast<int64_t>(m.size()) == Q * C && static_cast<int64_t>(answer.size()) == Q,
           "one-shot scoring: matrix of ", m.size(), " values for ", Q, " x ", C, " trials");
  double correct = 0;
  for (int64_t q = 0; q < Q; ++q) {
    bool tied = false;
    correct += score_trial(m.data() + q * C, C, answer[q], kind, &tied);
    r.ties += tied ? 1 : 0;
  }
  r.trials += Q;
  r.correct += correct;
  r.group_error_percent.push_back(100.0 * (1.0 - correct / static_cast<double>(Q)));
  r.error_percent = 100.0 * (1.0 - r.correct / static_cast<double>(r.trials));
}

OneShotResult evaluate_lake_runs(const std::vector<LakeRun>& runs, const PairFn& fn, ScoreKind kind) {
  OneShotResult r;
  for (const auto& run : runs) {
    const int64_t Q = run.queries.size(0), C = run.candidates.size(0);
    std::vector<double> m(static_cast<size_t>(Q * C));
    for (int64_t q = 0; q < Q; ++q)
      for (int64_t c = 0; c < C; ++c) m[q * C + c] = fn(run.queries.select(0, q), run.candidates.select(0, c));
    accumulate_group(m, Q, C, run.answer, kind, r);
  }
  return r;
}

OneShotResult evaluate_lake_runs_batched(const std::vector<LakeRun>& runs, const BatchFn& fn,
                                         ScoreKind kind) {
  OneShotResult r;
  for (const auto& run : runs) {
    const int64_t Q = run.queries.size(0), C = run.candidates.size(0);
    Tensor s = fn(run.queries, run.candidates);
    MN_DATA_CHECK(s.defined() && s.dim() == 2 && s.size(0) == Q && s.size(1) == C,
             "evaluate_lake_runs_batched: the score function must return (", Q, ", ", C,
             "), got ", s.defined() ? s.desc() : std::string("undefined"));
    accumulate_group(s.to_double_vector(), Q, C, run.answer, kind, r);
  }
  return r;
}

std::vector<double> ink_points_centered(const Tensor& image) {
  MN_DATA_CHECK(image.dim() == 2 && image.dtype() == DType::U8 && image.is_cpu(),
           "ink_points: expected a (H, W) uint8 CPU image, got ", image.desc());
  Tensor im = image.contiguous();
  const int64_t H = im.size(0), W = im.size(1);
  const uint8_t* p = im.data<uint8_t>();
  std::vector<double> pts;
  double mr = 0, mc = 0;
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x)
      if (p[y * W + x] < 128) {
        pts.push_back(static_cast<double>(y));
        pts.push_back(static_cast<double>(x));
        mr += y;
        mc += x;
      }
  const size_t n = pts.size() / 2;
  if (n == 0) return pts;
  mr /= n;
  mc /= n;
  for (size_t i = 0; i < n; ++i) {
    pts[2 * i] -= mr;
    pts[2 * i + 1] -= mc;
  }
  return pts;
}

double modified_hausdorff(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t na = a.size() / 2, nb = b.size() / 2;
  if (na == 0 || nb == 0) return std::numeric_limits<double>::infinity();
  // Structure-of-arrays copy of B so the inner loop vectorises; one pass fills
  // both the row minima (A -> B) and the column minima (B -> A).
  std::vector<double> by(nb), bx(nb), colmin(nb, std::numeric_limits<double>::infinity());
  for (size_t j = 0; j < nb; ++j) {
    by[j] = b[2 * j];
    bx[j] = b[2 * j + 1];
  }
  double sum_a = 0;
  for (size_t i = 0; i < na; ++i) {
    const double ay = a[2 * i], ax = a[2 * i + 1];
    double rmin = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < nb; ++j) {
      const double dy = ay - by[j], dx = ax - bx[j];
      const double d = dy * dy + dx * dx;
      rmin = d < rmin ? d : rmin;
      colmin[j] = d < colmin[j] ? d : colmin[j];
    }
    sum_a += std::sqrt(rmin);
  }
  double sum_b = 0;
  for (size_t j = 0; j < nb; ++j) sum_b += std::sqrt(colmin[j]);
  return std::max(sum_a / static_cast<double>(na), sum_b / static_cast<double>(nb));
}

double mhd_images(const Tensor& a, const Tensor& b) {
  return modified_hausdorff(ink_points_centered(a), ink_points_centered(b));
}

Tensor mhd_matrix(const Tensor& queries, const Tensor& candidates) {
  MN_DATA_CHECK(queries.dim() == 3 && candidates.dim() == 3, "mhd_matrix: expected (Q, H, W) and (C, H, W), got ",
           queries.desc(), " and ", candidates.desc());
  const int64_t Q = queries.size(0), C = candidates.size(0);
  std::vector<std::vector<double>> qp(Q), cp(C);
  for (int64_t i = 0; i < Q; ++i) qp[i] = ink_points_centered(queries.select(0, i));
  for (int64_t j = 0; j < C; ++j) cp[j] = ink_points_centered(candidates.select(0, j));
  std::vector<double> m(static_cast<size_t>(Q * C));
  parallel_for(0, Q * C, 1, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) m[k] = modified_hausdorff(qp[k / C], cp[k % C]);
  });
  return Tensor::from_vector(m, {Q, C});
}

}  // namespace mn::data
