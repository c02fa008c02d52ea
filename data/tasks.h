// N-way one-shot tasks drawn from an ImageDataset (e.g. Omniglot validation),
// seeded and reproducible, and their evaluation through the position-
// independent scorer of data/lake_runs.h.
//
//   TaskKind::LakeKoch: as Lake et al. and Koch et al.: one alphabet (uniform
//     over alphabets with >= N characters), N distinct characters, two distinct
//     drawers d1, d2 drawn from the drawers all N characters share. Candidates
//     = each character's drawing by d1; queries = each character's drawing by
//     d2 (N trials per task).
//   TaskKind::AnchorCandidates: the Omniglot study's variant: one alphabet, N
//     characters, one random drawing of each as candidates, and one anchor: a
//     different drawing (another drawer) of one of the N (1 trial per task).
// Candidates are stored in random order (answer[] gives the truth), so no
// consumer can profit from a fixed position of the true match.
#pragma once
#include <cstdint>
#include <vector>

#include "data/dataset.h"
#include "data/lake_runs.h"

namespace mn::data {

enum class TaskKind { LakeKoch, AnchorCandidates };

struct TaskOptions {
  int n_way = 20;
  int num_tasks = 320;  // the default size of a validation sweep
  uint64_t seed = 0;
  TaskKind kind = TaskKind::LakeKoch;
  bool within_alphabet = true;  // false: characters drawn from the whole dataset
};

struct OneShotTask {
  int32_t alphabet = -1;            // -1 when not within one alphabet
  std::vector<int64_t> candidates;  // (N) dataset image indices, one per class
  std::vector<int64_t> queries;     // (Q) dataset image indices
  std::vector<int32_t> answer;      // (Q) index into candidates of the true class
};

// Throws when no alphabet has n_way characters (within_alphabet) or when the
// dataset lacks drawers/alphabets the kind needs.
std::vector<OneShotTask> make_one_shot_tasks(const ImageDataset& ds, const TaskOptions& opt);

// Scores tasks with a batched function on images ((Q,H,W) x (C,H,W) -> (Q,C)).
OneShotResult evaluate_tasks(const ImageDataset& ds, const std::vector<OneShotTask>& tasks,
                             const BatchFn& fn, ScoreKind kind);
// Scores tasks from precomputed embeddings, one row per dataset image
// ((N, D) float32/float64 on any device; read back once): cost = Euclidean
// distance (squared is equivalent for ranking; plain L2 is what is computed).
OneShotResult evaluate_tasks_embeddings(const std::vector<OneShotTask>& tasks, const Tensor& emb);

// The images of `idx` stacked as (n, H, W) uint8 (CPU).
Tensor gather_images(const ImageDataset& ds, const std::vector<int64_t>& idx);

}  // namespace mn::data
