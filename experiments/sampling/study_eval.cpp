// The sampling study's evaluation: per-epoch validation, the final test with
// the study's and the meaningful metrics, and the scatter plots (see study.h).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "autograd/ops.h"
#include "experiments/common/metrics.h"
#include "experiments/sampling/study.h"
#include "kernels/distance.h"
#include "runtime/error.h"

namespace mn::exp::sampling {

HostEmb SamplingStudy::embed(const SplitImages& s, const std::vector<int64_t>& idx) {
  ag::NoGradGuard ng;
  net_->eval();
  HostEmb h;
  h.n = static_cast<int64_t>(idx.size());
  h.d = f_->i64("embedding-dim");
  h.v.resize(static_cast<size_t>(h.n * h.d));
  const int64_t step = f_->i64("eval-batch");
  for (int64_t i = 0; i < h.n; i += step) {
    std::vector<int64_t> part(idx.begin() + i, idx.begin() + std::min(h.n, i + step));
    Tensor e = net_->forward(ag::Variable(gather_images(s, part, data_->side, device_))).data();
    Tensor c = e.to(Device::cpu()).to(DType::F32).contiguous();
    std::memcpy(h.v.data() + i * h.d, c.data<float>(), sizeof(float) * static_cast<size_t>(c.numel()));
  }
  net_->train();
  return h;
}

HostEmb SamplingStudy::embed_all(const SplitImages& s) {
  std::vector<int64_t> idx(static_cast<size_t>(s.size()));
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  return embed(s, idx);
}

double SamplingStudy::study_test_accuracy(const HostEmb& e, const std::vector<int64_t>& subset, bool ten) {
  if (st_.id == Strategy::RandomOfflinePair) return study_offline_pair_accuracy(e, ten ? pairs10_ : pairs9_);
  if (st_.id == Strategy::RandomOfflineTriplet) return triplet_accuracy(e, ten ? trip10_ : trip9_);
  // Online strategies: balanced test batches of (number of classes) x K, the
  // strategy's own miner on each.
  const auto& y = data_->test10.y;
  // K = --per-class (the study's 25), or the smallest class of the subset when
  // that is smaller (tiny test sets).
  std::map<int32_t, int64_t> count;
  for (int64_t i : subset) ++count[y[i]];
  int64_t K = f_->i64("per-class");
  for (const auto& [c, n] : count) K = std::min(K, n);
  const int P = static_cast<int>(count.size());
  if (K < 2 || P < 2) return std::nan("");
  const int64_t nb = static_cast<int64_t>(subset.size()) / (P * K);
  Generator g(static_cast<uint64_t>(f_->i64("test-seed")));
  const auto batches = balanced_batches(y, subset, P, static_cast<int>(K), nb, g);
  // Per batch the share of tuples ordered right, then the mean over batches (as
  // the study's code averages its per-batch accuracies); a batch where the
  // triplet miner finds nothing scores the study's one fallback triplet.
  double sum = 0;
  int64_t counted = 0;
  for (size_t b = 0; b < batches.size(); ++b) {
    const auto& idx = batches[b];
    const int64_t B = static_cast<int64_t>(idx.size());
    std::vector<float> rows;
    std::vector<int64_t> lab;
    for (int64_t i : idx) {
      rows.insert(rows.end(), e.row(i), e.row(i) + e.d);
      lab.push_back(y[i]);
    }
    HostEmb be;
    be.v = rows;
    be.n = B;
    be.d = e.d;
    Tensor dist = kernels::pairwise_distance_matrix(Tensor::from_vector(rows, {B, e.d}), true);
    Tensor labels = Tensor::from_vector(lab, {B});
    Generator mg(static_cast<uint64_t>(f_->i64("test-seed")) + 1, static_cast<uint64_t>(b) << 24);
    int64_t ok = 0, total = 0;
    if (st_.pairs) {
      auto neg = st_.id == Strategy::HardNegativeOnlinePair ? kernels::PairNegatives::Hardest
                                                             : kernels::PairNegatives::Random;
      kernels::MinedPairs m = kernels::mine_pairs(dist, labels, neg, &mg);
      const int64_t* pr = m.pairs.data<int64_t>();
      std::vector<double> dp, dn;
      for (int64_t k = 0; k < m.pairs.size(0); ++k) (k < m.num_pos ? dp : dn).push_back(be.dist(pr[2 * k], pr[2 * k + 1]));
      const size_t n = std::min(dp.size(), dn.size());
      for (size_t k = 0; k < n; ++k) ok += dn[k] > dp[k];
      total = static_cast<int64_t>(n);
    } else {
      kernels::MinedTriplets m = kernels::mine_triplets(dist, labels, miner_params(), &mg);
      std::vector<int64_t> t = m.triplets.to_vector<int64_t>();
      if (t.empty()) t = {B - 2, B - 1, 0};  // the fallback of train_step
      for (size_t k = 0; k + 2 < t.size(); k += 3) ok += be.dist(t[k], t[k + 2]) > be.dist(t[k], t[k + 1]);
      total = static_cast<int64_t>(t.size() / 3);
    }
    if (total > 0) {
      sum += static_cast<double>(ok) / static_cast<double>(total);
      ++counted;
    }
  }
  return counted ? sum / static_cast<double>(counted) : 0.0;
}

Stats SamplingStudy::untrained_metrics() {
  HostEmb e = embed_all(data_->test10);
  std::vector<int64_t> all(static_cast<size_t>(e.n));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  // Every metric of the final test that can fail, so the report shows what
  // training added (the k-NN gallery is the untrained net's training embeddings).
  HostEmb etr = embed_all(data_->train);
  const KnnResult knn = knn_accuracy(etr, data_->train.y, e, data_->test10.y, data_->test9);
  Stats s{{"study_acc_test10", 100 * study_test_accuracy(e, all, true)},
          {"study_acc_test9", 100 * study_test_accuracy(e, data_->test9, false)},
          {"couple_acc_test10", 100 * triplet_accuracy(e, couple10_)},
          {"couple_acc_test9", 100 * triplet_accuracy(e, couple9_)},
          {"knn1_acc_test9", 100 * knn.acc1},
          {"knn5_acc_test9", 100 * knn.acc5},
          {"recall1_test10", 100 * recall_at_1(e, data_->test10.y)},
          {"unseen_auroc", unseen_auroc(etr, data_->train.y, e, data_->test10.y, data_->unseen)}};
  scatter_png(e, out_dir_ + "/embedding_before.png", plot_title() + ": test set before training");
  return s;
}

int64_t SamplingStudy::validation_work() const { return data_ ? data_->test10.size() : 10000; }

Stats SamplingStudy::validate() {
  HostEmb e = embed_all(data_->test10);
  std::vector<int64_t> all(static_cast<size_t>(e.n));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  return {{"test10_study_acc", 100 * study_test_accuracy(e, all, true)},
          {"test10_couple_acc", 100 * triplet_accuracy(e, couple10_)},
          {"test10_recall1", 100 * recall_at_1(e, data_->test10.y)},
          {"epoch_index", static_cast<double>(epoch_)}};
}

namespace {
// The last epoch's mean of `key` and the mean over epochs of `mean_key` from metrics.jsonl.
void read_log(const std::string& path, const char* last_key, double* last, const char* mean_key, double* mean) {
  *last = std::nan("");
  *mean = std::nan("");
  std::ifstream in(path);
  std::string line;
  double s = 0;
  int64_t n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("epoch")) continue;
    if (j.contains(last_key) && j[last_key].is_number()) *last = j[last_key].get<double>();
    if (j.contains(mean_key) && j[mean_key].is_number()) {
      s += j[mean_key].get<double>();
      ++n;
    }
  }
  if (n) *mean = s / static_cast<double>(n);
}
Json num(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }
}  // namespace

std::string SamplingStudy::final_test(Json& out) {
  std::vector<int64_t> all(static_cast<size_t>(data_->test10.size()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  // Table 1's "Test": one evaluation of the whole test set (embedding + the study's metric).
  const auto t0 = std::chrono::steady_clock::now();
  HostEmb e10 = embed_all(data_->test10);
  const double study10 = 100 * study_test_accuracy(e10, all, true);
  const double test_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const double study9 = 100 * study_test_accuracy(e10, data_->test9, false);
  HostEmb etr = embed_all(data_->train);
  double train_acc, tuples;
  read_log(out_dir_ + "/metrics.jsonl", "train_acc", &train_acc, "tuples", &tuples);
  const KnnResult knn = knn_accuracy(etr, data_->train.y, e10, data_->test10.y, data_->test9);
  const double couple10 = 100 * triplet_accuracy(e10, couple10_), couple9 = 100 * triplet_accuracy(e10, couple9_);
  const double r1 = 100 * recall_at_1(e10, data_->test10.y);
  const double auroc = unseen_auroc(etr, data_->train.y, e10, data_->test10.y, data_->unseen);
  scatter_png(e10, out_dir_ + "/embedding_after.png", plot_title() + ": test set after training");

  Json s;
  s["dataset"] = data_->dataset;
  s["strategy"] = st_.flag;
  s["strategy_title"] = st_.title;
  s["unseen_class"] = data_->unseen;
  s["unseen_class_name"] = data_->class_names[data_->unseen];
  s["train_images"] = data_->train.size();
  s["train_images_in_file"] = data_->train_total;
  s["data_note"] = data_->note;
  s["tuples_per_batch"] = num(tuples);
  s["test_ms"] = test_ms;
  s["study_acc_test10"] = study10;
  s["study_acc_test9"] = study9;
  s["study_acc_train"] = num(train_acc);
  s["couple_acc_test10"] = couple10;
  s["couple_acc_test9"] = couple9;
  s["knn1_acc_test9"] = 100 * knn.acc1;
  s["knn5_acc_test9"] = 100 * knn.acc5;
  s["recall1_test10"] = r1;
  s["unseen_auroc"] = num(auroc);
  Json u;
  for (const auto& [k, v] : untrained_) u[k] = num(v);
  s["untrained"] = u;
  out["sampling"] = s;

  std::ostringstream r;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s on %s (class %d '%s' unseen, %lld training images%s%s)\n\n"
                "| metric | value |\n|---|---:|\n"
                "| study's accuracy, Test10 (as its code computes it) | %.2f |\n"
                "| study's accuracy, Test9 | %.2f |\n| study's accuracy, Train (last epoch's batches) | %.2f |\n",
                st_.title, data_->dataset.c_str(), data_->unseen, data_->class_names[data_->unseen].c_str(),
                static_cast<long long>(data_->train.size()), data_->note.empty() ? "" : "; ", data_->note.c_str(),
                study10, study9, train_acc);
  r << buf;
  std::snprintf(buf, sizeof buf,
                "| matched-couple accuracy, Test10 (fixed triplets: d(a,n) > d(a,p)) | %.2f |\n"
                "| matched-couple accuracy, Test9 | %.2f |\n| 1-NN accuracy, Test9 (training set as gallery) | %.2f |\n"
                "| 5-NN accuracy, Test9 | %.2f |\n| Recall@1, Test10 | %.2f |\n"
                "| unseen class AUROC (distance to the nearest seen centroid) | %.4f |\n"
                "| tuples per batch | %.0f |\n| test time (Test10, embed + metric) | %.0f ms |\n",
                couple10, couple9, 100 * knn.acc1, 100 * knn.acc5, r1, auroc, tuples, test_ms);
  r << buf;
  if (!untrained_.empty()) {
    r << "\nThe untrained net:";
    for (const auto& [k, v] : untrained_) {
      std::snprintf(buf, sizeof buf, " %s %.2f;", k.c_str(), v);
      r << buf;
    }
    r << "\n";
  }
  return r.str();
}

void SamplingStudy::scatter_png(const HostEmb& e, const std::string& png, const std::string& title) const {
  if (e.d < 2) return;
  // The study's colours: the unseen class red, the others in this order.
  static const char* kColours[] = {"#1f4fd8", "#2ca02c", "#ff8c00", "#e6c800", "#8b3fc0",
                                   "#8c564b", "#ff69b4", "#17becf", "#7f7f7f"};
  const std::string dat = png + ".dat", gp = png + ".gp";
  std::vector<int32_t> order;
  for (int32_t c = 0; c < 10; ++c)
    if (c != data_->unseen) order.push_back(c);
  order.push_back(data_->unseen);  // drawn last, on top
  {
    std::ofstream d(dat);
    MN_CHECK(d.good(), "sampling: cannot write '", dat, "'");
    for (int32_t c : order) {
      d << "# class " << c << "\n";
      for (int64_t i = 0; i < e.n; ++i)
        if (data_->test10.y[i] == c) d << e.row(i)[0] << " " << e.row(i)[1] << "\n";
      d << "\n\n";
    }
  }
  std::ostringstream g;
  g << "set terminal pngcairo size 800,680 noenhanced\nset output '" << png << "'\nset title '" << title
    << "'\nset xlabel 'embedding 1'\nset ylabel 'embedding 2'\nset key outside right\nplot ";
  for (size_t k = 0; k < order.size(); ++k) {
    const int32_t c = order[k];
    const std::string col = c == data_->unseen ? "#e41a1c" : kColours[k % 9];
    g << (k ? ", " : "") << "'" << dat << "' index " << k << " with points pt 7 ps 0.35 lc rgb '#80"
      << col.substr(1) << "' title '" << data_->class_names[c] << (c == data_->unseen ? " (unseen)" : "") << "'";
  }
  g << "\n";
  {
    std::ofstream s(gp);
    s << g.str();
  }
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return;  // .dat / .gp left for the user
  if (std::system(("gnuplot '" + gp + "' 2>/dev/null").c_str()) == 0) {
    std::remove(dat.c_str());
    std::remove(gp.c_str());
  }
}

}  // namespace mn::exp::sampling
