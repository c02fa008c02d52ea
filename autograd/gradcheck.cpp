// Float64 central-difference gradient checker (see gradcheck.h).
#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

namespace mn::ag {

namespace {

double weighted_sum(const Tensor& out, const std::vector<double>& w) {
  std::vector<double> v = out.to_double_vector();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += w[i] * v[i];
  return s;
}

}  // namespace

GradcheckResult gradcheck(const std::function<Variable(const std::vector<Variable>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opts) {
  GradcheckResult res;
  std::vector<bool> check(inputs.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool want = opts.check_input.empty() ? true : (i < opts.check_input.size() && opts.check_input[i]);
    check[i] = want && is_floating(inputs[i].dtype());
    if (check[i])
      MN_CHECK(inputs[i].dtype() == DType::F64, "gradcheck: input ", i, " is ", inputs[i].desc(),
               "; gradient checks run in float64");
  }

  // Analytic gradients: backward with grad_output = w.
  std::vector<Variable> vars;
  for (size_t i = 0; i < inputs.size(); ++i) vars.emplace_back(inputs[i].clone(), check[i]);
  if (opts.before_forward) opts.before_forward();
  Variable out = f(vars);
  MN_CHECK(out.defined(), "gradcheck: the function returned an undefined Variable");
  MN_CHECK(out.dtype() == DType::F64, "gradcheck: output is ", out.data().desc(), ", expected float64");
  std::mt19937_64 rng(opts.weight_seed);
  std::uniform_real_distribution<double> U(0.5, 1.5);
  std::vector<double> w(static_cast<size_t>(out.numel()));
  for (auto& x : w) x = (rng() & 1 ? 1.0 : -1.0) * U(rng);
  Tensor wt = Tensor::from_vector(w, out.shape(), out.device());
  MN_CHECK(out.requires_grad(), "gradcheck: output does not require grad (no checked input reaches it)");
  out.backward(wt);

  auto eval = [&](size_t which, const Tensor& replaced) {
    std::vector<Variable> vs;
    for (size_t i = 0; i < inputs.size(); ++i) vs.emplace_back(i == which ? replaced : inputs[i], false);
    NoGradGuard ng;
    if (opts.before_forward) opts.before_forward();
    return weighted_sum(f(vs).data(), w);
  };

  double f0 = 0;
  bool have_f0 = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!check[i]) continue;
    std::vector<double> x = inputs[i].to_double_vector();
    std::vector<double> analytic = vars[i].has_grad()
                                       ? vars[i].grad().to_double_vector()
                                       : std::vector<double>(x.size(), 0.0);
    for (size_t k = 0; k < x.size(); ++k) {
      if (opts.skip && opts.skip(i, static_cast<int64_t>(k))) {
        res.skipped++;
        continue;
      }
      auto at = [&](double xv) {
        std::vector<double> xs = x;
        xs[k] = xv;
        return eval(i, Tensor::from_vector(xs, inputs[i].shape(), inputs[i].device()));
      };
      double fp = at(x[k] + opts.eps), fm = at(x[k] - opts.eps);
      double numeric = (fp - fm) / (2 * opts.eps);
      if (opts.skip_kinks) {
        if (!have_f0) {
          f0 = eval(i, inputs[i]);
          have_f0 = true;
        }
        double right = (fp - f0) / opts.eps, left = (f0 - fm) / opts.eps;
        if (std::abs(right - left) > opts.kink_tol * std::max({std::abs(right), std::abs(left), 1.0})) {
          res.skipped++;
          continue;
        }
      }
      double a = analytic[k];
      double err = std::abs(a - numeric) / std::max({std::abs(a), std::abs(numeric), 1.0});
      if (!std::isfinite(a) || !std::isfinite(numeric)) err = INFINITY;
      res.checked++;
      if (err > res.max_error || res.worst_index < 0) {
        res.max_error = err;
        res.worst_input = i;
        res.worst_index = static_cast<int64_t>(k);
        res.worst_analytic = a;
        res.worst_numeric = numeric;
      }
    }
  }

  std::ostringstream os;
  int64_t total = res.checked + res.skipped;
  res.ok = res.max_error <= opts.tol;
  if (total > 0 && static_cast<double>(res.skipped) > opts.max_skip_fraction * static_cast<double>(total)) {
    res.ok = false;
    os << "too many elements skipped as kinks (" << res.skipped << " of " << total << "); ";
  }
  if (res.checked == 0) {
    res.ok = false;
    os << "no element was checked; ";
  }
  os << "gradcheck " << (res.ok ? "passed" : "FAILED") << ": worst relative error " << res.max_error
     << " (tol " << opts.tol << ") at input " << res.worst_input << " element " << res.worst_index
     << ": analytic " << res.worst_analytic << " vs numeric " << res.worst_numeric << "; "
     << res.checked << " checked, " << res.skipped << " skipped";
  res.message = os.str();
  return res;
}

}  // namespace mn::ag
