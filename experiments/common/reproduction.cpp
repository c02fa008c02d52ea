// Two-sided reproduction counts (reproduction.h).
#include "experiments/common/reproduction.h"

#include <cmath>

namespace mn::exp {

const char* repro_name(Repro r) {
  switch (r) {
    case Repro::Within: return "within";
    case Repro::Above: return "above";
    case Repro::Below: return "below";
    case Repro::Degenerate: return "degenerate";
    case Repro::NoPaper: return "no paper number";
    case Repro::NotRun: return "not run";
  }
  return "?";
}

Repro compare_with_paper(double paper, const SampleStats& ours, double one_seed_tolerance, bool degenerate) {
  if (ours.n == 0 || !std::isfinite(ours.mean)) return Repro::NotRun;
  if (degenerate) return Repro::Degenerate;
  if (!std::isfinite(paper) || paper < 0) return Repro::NoPaper;
  const double tol = ours.n >= 2 && std::isfinite(ours.sd) ? ours.sd : one_seed_tolerance;
  if (std::abs(ours.mean - paper) <= tol) return Repro::Within;
  return ours.mean > paper ? Repro::Above : Repro::Below;
}

void ReproCount::add(Repro r) {
  switch (r) {
    case Repro::Within: ++within; break;
    case Repro::Above: ++above; break;
    case Repro::Below: ++below; break;
    case Repro::Degenerate: ++degenerate; break;
    case Repro::NoPaper: ++no_paper; break;
    case Repro::NotRun: ++not_run; break;
  }
}

std::string ReproCount::line() const {
  std::string s = std::to_string(within) + " within, " + std::to_string(above) + " above, " + std::to_string(below) +
                  " below of " + std::to_string(compared()) + " compared";
  if (degenerate) s += "; " + std::to_string(degenerate) + " degenerate (not counted)";
  if (no_paper) s += "; " + std::to_string(no_paper) + " without a paper number";
  if (not_run) s += "; " + std::to_string(not_run) + " not run";
  return s;
}

}  // namespace mn::exp
