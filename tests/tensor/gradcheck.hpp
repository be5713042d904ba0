// Finite-difference gradient checks: d(sum(w * f(inputs)))/d(input) by central differences
// in double-free float32 arithmetic against autograd, for a fixed random weighting w (so
// every output element contributes differently).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "qnum/tensor/autograd.hpp"

namespace qnum_test {

struct GradcheckOptions {
  float eps = 1e-2f;   // central-difference step (float32: small steps lose precision)
  float rtol = 2e-2f;  // relative tolerance on each gradient entry
  float atol = 2e-3f;  // absolute tolerance
  std::uint64_t seed = 99;
};

/// Checks autograd against central differences for every element of every input that
/// requires grad. `f` must be deterministic (seeded dropout etc.). Returns the number of
/// mismatching entries (and reports the first few).
inline int gradcheck(const std::function<qnum::Tensor(const std::vector<qnum::Tensor>&)>& f,
                     std::vector<qnum::Tensor> inputs, GradcheckOptions opt = {}) {
  using qnum::Tensor;
  const Tensor probe = f(inputs);
  const Tensor w = Tensor::uniform(probe.shape(), opt.seed, 0.5f, 1.5f);
  auto objective = [&](const std::vector<Tensor>& in) {
    const Tensor y = f(in);
    double s = 0;
    for (std::int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y.values()[i]) * w.values()[i];
    return s;
  };
  for (auto& t : inputs) t.zero_grad();
  const Tensor y = f(inputs);
  y.backward(w);
  int bad = 0;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    Tensor& t = inputs[k];
    if (!t.requires_grad()) continue;
    const std::vector<float> analytic = t.has_grad() ? std::vector<float>(t.grad().begin(), t.grad().end())
                                                     : std::vector<float>(static_cast<std::size_t>(t.numel()), 0.0f);
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      float& v = t.values()[i];
      const float saved = v;
      v = saved + opt.eps;
      const double up = objective(inputs);
      v = saved - opt.eps;
      const double down = objective(inputs);
      v = saved;
      const double numeric = (up - down) / (2.0 * opt.eps);
      const double a = analytic[static_cast<std::size_t>(i)];
      if (std::fabs(a - numeric) > opt.atol + opt.rtol * std::fabs(numeric)) {
        if (bad < 5)
          MESSAGE("input " << k << " element " << i << ": autograd " << a << " vs finite difference " << numeric);
        ++bad;
      }
    }
  }
  return bad;
}

}  // namespace qnum_test
