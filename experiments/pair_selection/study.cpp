// One method on one fold of the informed-pair-selection study; see study.h.
#include "experiments/pair_selection/study.h"

#include <chrono>

#include "runtime/error.h"

namespace mn::pairsel {

namespace {
struct MethodName {
  Method m;
  const char* flag;
  const char* label;
};
constexpr MethodName kNames[] = {
    {Method::Base, "base", "BASE"},           {Method::BaseOrdered, "base-ordered", "BASE*"},
    {Method::DynE, "dyne", "DynE"},           {Method::DynEOrdered, "dyne-ordered", "DynE*"},
    {Method::DynEE, "dynee", "DynEE"},        {Method::DynEEOrdered, "dynee-ordered", "DynEE*"}};

// The pairs of `p` in a fresh random order (the unordered methods shuffle
// every epoch, as Keras's fit(shuffle=True) does).
void shuffle_pairs(std::vector<Pair>& p, Generator& g) {
  for (size_t i = p.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(g.next_int(0, static_cast<int64_t>(i)));
    std::swap(p[i - 1], p[j]);
  }
}
}  // namespace

const char* method_flag(Method m) { return kNames[static_cast<int>(m)].flag; }
const char* method_label(Method m) { return kNames[static_cast<int>(m)].label; }
bool method_ordered(Method m) {
  return m == Method::BaseOrdered || m == Method::DynEOrdered || m == Method::DynEEOrdered;
}
Method method_from_flag(const std::string& s) {
  for (const auto& n : kNames)
    if (s == n.flag) return n.m;
  MN_CHECK(false, "pair_selection: --method", "unknown method '", s,
           "' (base, base-ordered, dyne, dyne-ordered, dynee, dynee-ordered or all)");
  return Method::Base;
}

uint64_t fold_seed(uint64_t seed, int fold, uint64_t stream) {
  // SplitMix64 of (seed, fold, stream): distinct, well-mixed Philox keys.
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(fold) * 0xBF58476D1CE4E5B9ull +
               stream * 0x94D049BB133111EBull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<float> prototypes(SiameseMlp& net, Prototype kind, const Examples& train,
                              const std::vector<float>& input_centroids,
                              const std::vector<float>& train_emb) {
  const int64_t E = net.embedding_dim();
  if (kind == Prototype::EmbeddingCentroid) {
    MN_CHECK(static_cast<int64_t>(train_emb.size()) == train.size() * E, "pair_selection: --prototype",
             "embedding-centroid needs the ", train.size(), " training embeddings, got ",
             train_emb.size() / std::max<int64_t>(E, 1));
    return class_centroids(train_emb.data(), train.size(), E, train.y, train.classes);
  }
  std::vector<float> out(static_cast<size_t>(train.classes * E));
  net.embed(input_centroids.data(), train.classes, out.data());
  return out;
}

RunResult run_fold(Method method, int fold, const StudyConfig& cfg, const Examples& train,
                   const Examples& test, RunTrace* trace) {
  const auto t0 = std::chrono::steady_clock::now();
  MN_CHECK(cfg.cycle > 0 && cfg.epochs > 0 && cfg.eval_every > 0, "pair_selection",
           "epochs ", cfg.epochs, ", cycle ", cfg.cycle, ", eval every ", cfg.eval_every);
  MN_CHECK(train.dim == cfg.mlp.input && test.dim == cfg.mlp.input, "pair_selection",
           "input width ", train.dim, " / ", test.dim, " but the MLP takes ", cfg.mlp.input);
  SiameseMlp net(cfg.mlp, fold_seed(cfg.seed, fold, 1));
  if (trace)
    for (size_t l = 0; l < cfg.mlp.hidden.size(); ++l) {
      trace->weights.push_back(net.weight(l));
      trace->biases.push_back(net.bias(l));
    }
  Generator pair_rng(fold_seed(cfg.seed, fold, 2), 0);
  // The epoch shuffles draw from a stream of their own so that every method's
  // pair sets come from the same sequence as far as their logic allows.
  Generator shuffle_rng(fold_seed(cfg.seed, fold, 3), 0);
  const int64_t n = train.size(), E = net.embedding_dim();
  std::vector<float> emb(static_cast<size_t>(n * E));
  std::vector<float> test_emb(static_cast<size_t>(test.size() * E));
  const std::vector<float> centroids =
      class_centroids(train.x.data(), n, train.dim, train.y, train.classes);
  std::vector<int32_t> proto_class(static_cast<size_t>(train.classes));
  for (int32_t c = 0; c < train.classes; ++c) proto_class[c] = c;

  auto order = [&](std::vector<Pair>& p, const float* space, int64_t dim) {
    const auto knn = nearest_neighbours(space, n, dim, cfg.knn, true);
    p = order_by_complexity(p, pair_complexity(p, knn, cfg.knn, train.y));
  };

  std::vector<Pair> pairs = random_pairs(train.y, pair_rng);
  if (method == Method::BaseOrdered) order(pairs, train.x.data(), train.dim);  // once, input space
  const bool dynamic_e = method == Method::DynE || method == Method::DynEOrdered;
  const bool dynamic_ee = method == Method::DynEE || method == Method::DynEEOrdered;
  const bool reorder = method == Method::DynEOrdered || method == Method::DynEEOrdered;

  RunResult res;
  res.method = method;
  res.fold = fold;
  std::vector<Pair> epoch_pairs;
  for (int epoch = 0; epoch < cfg.epochs; ++epoch) {
    if (epoch % cfg.cycle == 0) {
      bool have_emb = false;
      if (epoch > 0 && dynamic_e) pairs = random_pairs(train.y, pair_rng);
      if (epoch > 0 && dynamic_ee) {
        net.embed(train.x.data(), n, emb.data());
        have_emb = true;
        const auto losses = net.pair_losses(emb.data(), pairs);
        const auto nn = nearest_neighbours(emb.data(), n, E, 2, false);
        std::vector<int32_t> nn1(n), nn2(n);
        for (int64_t i = 0; i < n; ++i) {
          nn1[i] = nn[i * 2];
          nn2[i] = nn[i * 2 + 1];
        }
        const int64_t b = static_cast<int64_t>(pairs.size()) / cfg.exploit_div;
        pairs = exploit_pairs(pairs, losses, b, nn1, nn2, train.y, random_pairs(train.y, pair_rng),
                              pair_rng);
      }
      if (reorder) {
        if (!have_emb) net.embed(train.x.data(), n, emb.data());
        order(pairs, emb.data(), E);
      }
    }
    epoch_pairs = pairs;
    if (!method_ordered(method)) shuffle_pairs(epoch_pairs, shuffle_rng);
    if (trace) trace->epoch_pairs.push_back(epoch_pairs);
    const double loss = net.train_epoch(train.x.data(), n, epoch_pairs);
    if ((epoch + 1) % cfg.eval_every == 0) {
      net.embed(test.x.data(), test.size(), test_emb.data());
      if (cfg.prototype == Prototype::EmbeddingCentroid) net.embed(train.x.data(), n, emb.data());
      const std::vector<float> proto_emb = prototypes(net, cfg.prototype, train, centroids, emb);
      EvalPoint pt;
      pt.epoch = epoch + 1;
      pt.vote = vote_accuracy(test_emb.data(), test.size(), proto_emb.data(), proto_class, E,
                              test.y, cfg.mlp.margin);
      pt.train_loss = loss;
      for (const Pair& p : pairs) pt.genuine_pairs += p.impostor == 0;
      res.points.push_back(pt);
    }
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace mn::pairsel
