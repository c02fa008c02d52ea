// Random triplets/pairs, P x K batches, SSIM-mined triplets.
#include "data/samplers.h"
#include "data/file_io.h"

#include <cmath>
#include <map>

#include "data/ssim.h"

namespace mn::data {

ClassIndex::ClassIndex(const std::vector<int32_t>& labels) : labels_(labels) {
  int32_t mx = -1;
  for (int32_t l : labels) {
    MN_DATA_CHECK(l >= 0, "ClassIndex: negative label ", l);
    mx = std::max(mx, l);
  }
  by_class_.resize(static_cast<size_t>(mx + 1));
  for (size_t i = 0; i < labels.size(); ++i) by_class_[labels[i]].push_back(static_cast<int64_t>(i));
}

const std::vector<int32_t>& ClassIndex::classes_with_at_least(int k) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = at_least_.find(k);
  if (it != at_least_.end()) return it->second;
  std::vector<int32_t> v;
  for (size_t c = 0; c < by_class_.size(); ++c)
    if (static_cast<int>(by_class_[c].size()) >= k) v.push_back(static_cast<int32_t>(c));
  return at_least_.emplace(k, std::move(v)).first->second;
}

namespace {
int64_t uniform_index(int64_t n, Generator& g) { return g.next_int(0, n); }

// A class other than `c`, uniform among the non-empty ones.
int32_t other_class(const ClassIndex& ci, int32_t c, Generator& g) {
  const auto& nonempty = ci.classes_with_at_least(1);
  MN_DATA_CHECK(nonempty.size() >= 2, "sampler: need at least two non-empty classes");
  while (true) {
    int32_t o = nonempty[uniform_index(static_cast<int64_t>(nonempty.size()), g)];
    if (o != c) return o;
  }
}

// Anchor class uniform over classes with >= 2 images, anchor and positive
// distinct images of it.
void anchor_positive(const ClassIndex& ci, Generator& g, int32_t& c, int64_t& a, int64_t& p) {
  const auto& ok = ci.classes_with_at_least(2);
  MN_DATA_CHECK(!ok.empty(), "sampler: no class has two images");
  c = ok[uniform_index(static_cast<int64_t>(ok.size()), g)];
  const auto& imgs = ci.images_of(c);
  const int64_t n = static_cast<int64_t>(imgs.size());
  const int64_t i = uniform_index(n, g);
  int64_t j = uniform_index(n - 1, g);
  if (j >= i) ++j;  // uniform over the others, without rejection
  a = imgs[i];
  p = imgs[j];
}
}  // namespace

std::vector<Triplet> sample_random_triplets(const ClassIndex& ci, int64_t count, Generator& g) {
  std::vector<Triplet> out;
  out.reserve(count);
  for (int64_t t = 0; t < count; ++t) {
    int32_t c;
    Triplet tr{};
    anchor_positive(ci, g, c, tr.anchor, tr.positive);
    const auto& neg = ci.images_of(other_class(ci, c, g));
    tr.negative = neg[uniform_index(static_cast<int64_t>(neg.size()), g)];
    out.push_back(tr);
  }
  return out;
}

std::vector<Pair> sample_random_pairs(const ClassIndex& ci, int64_t count, double share, Generator& g) {
  MN_DATA_CHECK(share >= 0 && share <= 1, "sample_random_pairs: genuine share must be in [0, 1], got ", share);
  const int64_t n_gen = std::llround(share * static_cast<double>(count));
  std::vector<Pair> out;
  out.reserve(count);
  for (int64_t k = 0; k < count; ++k) {
    int32_t c;
    int64_t a, p;
    anchor_positive(ci, g, c, a, p);
    if (k < n_gen) {
      out.push_back({a, p, 1});
    } else {
      const auto& neg = ci.images_of(other_class(ci, c, g));
      out.push_back({a, neg[uniform_index(static_cast<int64_t>(neg.size()), g)], 0});
    }
  }
  std::vector<int64_t> perm = randperm(count, g);
  std::vector<Pair> shuffled(count);
  for (int64_t k = 0; k < count; ++k) shuffled[k] = out[perm[k]];
  return shuffled;
}

std::vector<int64_t> sample_pk_batch(const ClassIndex& ci, int P, int K, Generator& g) {
  MN_DATA_CHECK(P >= 1 && K >= 1, "sample_pk_batch: P and K must be >= 1 (got ", P, ", ", K, ")");
  const auto& ok = ci.classes_with_at_least(K);
  MN_DATA_CHECK(static_cast<int>(ok.size()) >= P, "sample_pk_batch: only ", ok.size(),
           " classes have ", K, " images, need P = ", P);
  std::vector<int64_t> cls = sample_without_replacement(static_cast<int64_t>(ok.size()), P, g);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(P) * K);
  for (int64_t c : cls) {
    const auto& imgs = ci.images_of(ok[c]);
    for (int64_t k : sample_without_replacement(static_cast<int64_t>(imgs.size()), K, g))
      out.push_back(imgs[k]);
  }
  return out;
}

std::vector<int64_t> sample_pk_batch_within_group(const ClassIndex& ci, const std::vector<int32_t>& group_of_class,
                                                  int P, int K, Generator& g) {
  MN_DATA_CHECK(P >= 1 && K >= 1, "sample_pk_batch_within_group: P and K must be >= 1 (got ", P, ", ", K, ")");
  MN_DATA_CHECK(static_cast<int64_t>(group_of_class.size()) >= ci.num_classes(),
                "sample_pk_batch_within_group: ", group_of_class.size(), " group entries for ", ci.num_classes(),
                " classes");
  // Eligible classes per group (memoised per (P, K) would save little: C is ~4k at most).
  std::map<int32_t, std::vector<int32_t>> by_group;
  for (int32_t c : ci.classes_with_at_least(K)) by_group[group_of_class[static_cast<size_t>(c)]].push_back(c);
  std::vector<const std::vector<int32_t>*> groups;
  int64_t total = 0;
  size_t largest = 0;
  for (auto& [gid, cls] : by_group) {
    largest = std::max(largest, cls.size());
    if (static_cast<int>(cls.size()) >= P) {
      groups.push_back(&cls);
      total += static_cast<int64_t>(cls.size());
    }
  }
  if (by_group.empty()) {
    size_t most = 0;
    for (int32_t c = 0; c < static_cast<int32_t>(ci.num_classes()); ++c) most = std::max(most, ci.images_of(c).size());
    MN_DATA_CHECK(false, "sample_pk_batch_within_group: no class has K = ", K, " images (the most any class has is ",
                  most, "): use K <= ", most);
  }
  MN_DATA_CHECK(!groups.empty(), "sample_pk_batch_within_group: no group (alphabet) has P = ", P, " classes with ", K,
                " images; the largest has ", largest, ": use P <= ", largest);
  int64_t pick = g.next_int(0, total);
  const std::vector<int32_t>* chosen = groups.back();
  for (const auto* cls : groups) {
    if (pick < static_cast<int64_t>(cls->size())) {
      chosen = cls;
      break;
    }
    pick -= static_cast<int64_t>(cls->size());
  }
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(P) * K);
  for (int64_t c : sample_without_replacement(static_cast<int64_t>(chosen->size()), P, g)) {
    const auto& imgs = ci.images_of((*chosen)[static_cast<size_t>(c)]);
    for (int64_t k : sample_without_replacement(static_cast<int64_t>(imgs.size()), K, g)) out.push_back(imgs[k]);
  }
  return out;
}

std::vector<Triplet> sample_ssim_triplets(const ClassIndex& ci, const Tensor& images,
                                          double data_range, int64_t count, Generator& g,
                                          bool mine_positive, bool mine_negative) {
  MN_DATA_CHECK(images.dim() == 3, "sample_ssim_triplets: images must be (N, H, W), got ", images.desc());
  // 1. Anchors and the negative class, drawn on the host.
  std::vector<Triplet> out(count);
  std::vector<int32_t> neg_class(count);
  std::vector<int64_t> ia, ib;
  std::vector<int64_t> pos_begin(count), neg_begin(count);
  for (int64_t t = 0; t < count; ++t) {
    int32_t c;
    anchor_positive(ci, g, c, out[t].anchor, out[t].positive);  // random positive kept unless mined
    neg_class[t] = other_class(ci, c, g);
    const auto& negs = ci.images_of(neg_class[t]);
    out[t].negative = negs[g.next_int(0, static_cast<int64_t>(negs.size()))];
    pos_begin[t] = static_cast<int64_t>(ia.size());
    if (mine_positive)
      for (int64_t j : ci.images_of(c))
        if (j != out[t].anchor) {
          ia.push_back(out[t].anchor);
          ib.push_back(j);
        }
    neg_begin[t] = static_cast<int64_t>(ia.size());
    if (mine_negative)
      for (int64_t j : negs) {
        ia.push_back(out[t].anchor);
        ib.push_back(j);
      }
  }
  if (ia.empty()) return out;
  for (int64_t i : ib)
    MN_DATA_CHECK(i < images.size(0), "sample_ssim_triplets: image index ", i, " beyond the ",
             images.size(0), " images");
  // 2. Every SSIM in one batched call, where the images live.
  const int64_t P = static_cast<int64_t>(ia.size());
  Tensor ta = Tensor::from_vector(ia, {P}, images.device());
  Tensor tb = Tensor::from_vector(ib, {P}, images.device());
  std::vector<double> s = ssim_pairs(images, ta, tb, data_range).to_double_vector();
  // 3. Hard positive: lowest SSIM; semi-hard negative: highest SSIM in its class.
  for (int64_t t = 0; t < count; ++t) {
    const int64_t pe = neg_begin[t], ne = t + 1 < count ? pos_begin[t + 1] : P;
    if (pe > pos_begin[t]) {
      int64_t best = pos_begin[t];
      for (int64_t k = pos_begin[t]; k < pe; ++k)
        if (s[k] < s[best]) best = k;
      out[t].positive = ib[best];
    }
    if (ne > pe) {
      int64_t best = pe;
      for (int64_t k = pe; k < ne; ++k)
        if (s[k] > s[best]) best = k;
      out[t].negative = ib[best];
    }
  }
  return out;
}

void split_triplets(const std::vector<Triplet>& t, std::vector<int64_t>& a, std::vector<int64_t>& p,
                    std::vector<int64_t>& n) {
  a.clear();
  p.clear();
  n.clear();
  for (const auto& x : t) {
    a.push_back(x.anchor);
    p.push_back(x.positive);
    n.push_back(x.negative);
  }
}

}  // namespace mn::data
