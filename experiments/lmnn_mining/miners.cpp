// The seven triplet miners of the LMNN study; see miners.h.
#include "experiments/lmnn_mining/miners.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>

#include "runtime/error.h"

namespace mn::lmnn {

const std::vector<Mining>& all_minings() {
  static const std::vector<Mining> all = {Mining::BA,   Mining::BH,   Mining::BSH, Mining::HPEN,
                                          Mining::EPEN, Mining::EPHN, Mining::NS};
  return all;
}

std::string mining_name(Mining m) {
  switch (m) {
    case Mining::BA: return "k-BA";
    case Mining::BH: return "k-BH";
    case Mining::BSH: return "k-BSH";
    case Mining::HPEN: return "k-HPEN";
    case Mining::EPEN: return "k-EPEN";
    case Mining::EPHN: return "k-EPHN";
    case Mining::NS: return "k-NS";
  }
  return "?";
}

Mining parse_mining(const std::string& s) {
  std::string t;
  for (char ch : s) t += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (t.rfind("k-", 0) == 0) t = t.substr(2);
  for (Mining m : all_minings()) {
    std::string n = mining_name(m).substr(2);
    for (char& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (n == t) return m;
  }
  MN_THROW("lmnn: unknown mining method '", s, "' (expected k-BA, k-BH, k-BSH, k-HPEN, k-EPEN, ",
           "k-EPHN, k-NS or all)");
}

double ns_weight(double D, int64_t d, double lambda) {
  const double x = std::clamp(D, 0.5, 1.99);
  const double log_q = static_cast<double>(d - 2) * std::log(x) +
                       0.5 * static_cast<double>(d - 3) * std::log(1.0 - 0.25 * x * x);
  return std::exp(std::min(std::log(lambda), -log_q));
}

namespace {

// Squared Euclidean distances (n, n) from the Gram matrix, clamped at 0.
Mat sq_distances(const Mat& X) {
  Mat G = matmul(X, X, false, true);
  const int64_t n = X.rows;
  Mat D(n, n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) D(i, j) = i == j ? 0.0 : std::max(G(i, i) + G(j, j) - 2.0 * G(i, j), 0.0);
  return D;
}

bool farthest_positives(Mining m) { return m == Mining::BH || m == Mining::HPEN; }

}  // namespace

Mined mine(const Mat& X, const std::vector<int32_t>& y, const MinerParams& p, Generator& g) {
  const int64_t n = X.rows;
  MN_CHECK(static_cast<int64_t>(y.size()) == n, "lmnn::mine: ", n, " points but ", y.size(),
           " labels");
  MN_CHECK(p.k >= 1, "lmnn::mine: k must be >= 1, got ", p.k);
  const size_t k = static_cast<size_t>(p.k);
  Mined out;
  if (n < 2) return out;
  const Mat D = sq_distances(X);
  // k-NS: distances between the L2-normalised points, weights per (i, l).
  Mat Dn;
  if (p.method == Mining::NS) {
    Mat Xn = X;
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t j = 0; j < X.cols; ++j) s += X(i, j) * X(i, j);
      s = s > 0 ? 1.0 / std::sqrt(s) : 0.0;
      for (int64_t j = 0; j < X.cols; ++j) Xn(i, j) *= s;
    }
    Dn = sq_distances(Xn);
  }
  std::vector<int32_t> pos, neg;
  std::vector<double> w;
  for (int64_t i = 0; i < n; ++i) {
    pos.clear();
    neg.clear();
    for (int64_t j = 0; j < n; ++j) {
      if (j == i) continue;
      (y[j] == y[i] ? pos : neg).push_back(static_cast<int32_t>(j));
    }
    auto by_distance = [&](int32_t a, int32_t b) {
      return D(i, a) < D(i, b) || (D(i, a) == D(i, b) && a < b);
    };
    std::sort(pos.begin(), pos.end(), by_distance);
    std::sort(neg.begin(), neg.end(), by_distance);
    const size_t kp = std::min(k, pos.size()), kn = std::min(k, neg.size());
    std::vector<int32_t> chosen_pos =
        farthest_positives(p.method) ? std::vector<int32_t>(pos.end() - kp, pos.end())
                                     : std::vector<int32_t>(pos.begin(), pos.begin() + kp);
    if (p.method == Mining::NS) {
      w.resize(neg.size());
      for (size_t r = 0; r < neg.size(); ++r) w[r] = ns_weight(std::sqrt(Dn(i, neg[r])), X.cols, p.lambda);
    }
    for (int32_t j : chosen_pos) {
      out.pull.push_back({static_cast<int32_t>(i), j});
      auto emit = [&](int32_t l) { out.triplets.push_back({static_cast<int32_t>(i), j, l}); };
      switch (p.method) {
        case Mining::BA:
          for (int32_t l : neg) emit(l);
          break;
        case Mining::BH:
        case Mining::EPHN:
          for (size_t r = 0; r < kn; ++r) emit(neg[r]);
          break;
        case Mining::EPEN:
        case Mining::HPEN:
          for (size_t r = neg.size() - kn; r < neg.size(); ++r) emit(neg[r]);
          break;
        case Mining::BSH: {
          // First negative strictly farther than the positive (sorted ascending).
          const double dij = D(i, j);
          auto it = std::upper_bound(neg.begin(), neg.end(), dij,
                                     [&](double v, int32_t l) { return v < D(i, l); });
          for (size_t r = 0; it != neg.end() && r < k; ++it, ++r) emit(*it);
          break;
        }
        case Mining::NS: {
          // Roulette wheel without replacement over the anchor's negatives.
          std::vector<double> wl = w;
          for (size_t r = 0; r < kn; ++r) {
            const double total = std::accumulate(wl.begin(), wl.end(), 0.0);
            if (!(total > 0)) break;
            const double u = g.next_uniform() * total;
            double acc = 0;
            size_t pick = neg.size() - 1;
            for (size_t q = 0; q < wl.size(); ++q) {
              acc += wl[q];
              if (wl[q] > 0 && u < acc) {
                pick = q;
                break;
              }
            }
            while (pick > 0 && wl[pick] == 0) --pick;  // round-off at the end of the wheel
            emit(neg[pick]);
            wl[pick] = 0;
          }
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace mn::lmnn
