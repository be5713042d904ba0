// Built-in test objectives for comparing samplers (and for tests), each with its search
// space, a grid for GridSampler and its known optimum:
//   branin          2-D, x0 in [-5, 10], x1 in [0, 15]; minimum 0.397887 at (-pi, 12.275),
//                   (pi, 2.275) and (9.42478, 2.475).
//   rastrigin       n-D (default 5), xi in [-5.12, 5.12]; minimum 0 at the origin.
//   mixed-precision per-layer bit widths {2, 4, 8, 16} (categorical) of a 4-layer model
//                   (parameters 1000, 4000, 4000, 100; sensitivities 2000, 300, 100, 0.5)
//                   with a cost model: sum over layers of sensitivity * 2^-width
//                   (quantization error) + 0.1 * parameters * width / 1000 (memory);
//                   separable, so its optimum is each layer's best width: 16, 8, 8, 4,
//                   value 9.664267578125.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <numbers>
#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/search/grid_sampler.hpp"
#include "qnum/search/trial.hpp"

namespace qnum::search {

/// Branin-Hoo function (the standard constants a=1, b=5.1/(4 pi^2), c=5/pi, r=6, s=10, t=1/(8 pi)).
inline double branin(double x0, double x1) {
  constexpr double pi = std::numbers::pi;
  const double b = 5.1 / (4 * pi * pi), c = 5 / pi, t = 1 / (8 * pi);
  const double u = x1 - b * x0 * x0 + c * x0 - 6;
  return u * u + 10 * (1 - t) * std::cos(x0) + 10;
}

/// Rastrigin function: 10 n + sum(x^2 - 10 cos(2 pi x)).
inline double rastrigin(const std::vector<double>& x) {
  double s = 10.0 * double(x.size());
  for (const double v : x) s += v * v - 10 * std::cos(2 * std::numbers::pi * v);
  return s;
}

/// The mixed-precision toy's layers: parameter count and sensitivity of the error to width.
struct ToyLayer {
  double params;
  double sensitivity;
};
inline const std::vector<ToyLayer>& mixed_precision_layers() {
  static const std::vector<ToyLayer> layers = {{1000, 2000.0}, {4000, 300.0}, {4000, 100.0}, {100, 0.5}};
  return layers;
}
inline const std::vector<std::int64_t>& mixed_precision_widths() {
  static const std::vector<std::int64_t> w = {2, 4, 8, 16};
  return w;
}
/// Cost of one layer at a width: sensitivity * 2^-width + 0.1 * params * width / 1000.
inline double mixed_precision_layer_cost(const ToyLayer& l, std::int64_t width) {
  return l.sensitivity * std::ldexp(1.0, -static_cast<int>(width)) + 0.1 * l.params * double(width) / 1000.0;
}

/// A named objective: direction, the function of a trial, a grid, and the known optimum.
struct BuiltinObjective {
  std::string name;
  std::string description;
  std::function<double(Trial&)> fn;
  GridSpace grid;
  double known_minimum = 0;
  std::size_t dims = 0;
};

/// "branin", "rastrigin" (dims, default 5) or "mixed-precision"; an error lists them otherwise.
inline BuiltinObjective make_builtin_objective(const std::string& name, std::size_t dims = 0) {
  BuiltinObjective o;
  o.name = name;
  if (name == "branin") {
    o.description = "Branin-Hoo, x0 in [-5, 10], x1 in [0, 15]";
    o.dims = 2;
    o.fn = [](Trial& t) { return branin(t.suggest_float("x0", -5.0, 10.0), t.suggest_float("x1", 0.0, 15.0)); };
    std::vector<ParamValue> g0, g1;
    for (int i = 0; i <= 10; ++i) g0.push_back(-5.0 + 1.5 * i), g1.push_back(1.5 * i);
    o.grid = {{"x0", g0}, {"x1", g1}};
    o.known_minimum = 0.39788735772973816;  // 5/(4 pi), Branin's global minimum
    return o;
  }
  if (name == "rastrigin") {
    o.dims = dims == 0 ? 5 : dims;
    qnum::detail::require(o.dims <= 20, "rastrigin: dims must be in [1, 20], got ", o.dims);
    o.description = "Rastrigin, " + std::to_string(o.dims) + "-D, xi in [-5.12, 5.12]";
    const auto n = o.dims;
    o.fn = [n](Trial& t) {
      std::vector<double> x(n);
      for (std::size_t i = 0; i < n; ++i) x[i] = t.suggest_float("x" + std::to_string(i), -5.12, 5.12);
      return rastrigin(x);
    };
    for (std::size_t i = 0; i < n; ++i) o.grid["x" + std::to_string(i)] = {-4.0, -2.0, 0.0, 2.0, 4.0};
    o.known_minimum = 0.0;
    return o;
  }
  if (name == "mixed-precision") {
    const auto& layers = mixed_precision_layers();
    o.dims = layers.size();
    o.description = "per-layer widths {2,4,8,16} of a 4-layer model: error + memory cost";
    o.fn = [](Trial& t) {
      double cost = 0;
      const auto& ls = mixed_precision_layers();
      for (std::size_t i = 0; i < ls.size(); ++i)
        cost += mixed_precision_layer_cost(
            ls[i], t.suggest_categorical("layer" + std::to_string(i) + "_width", mixed_precision_widths()));
      return cost;
    };
    double best = 0;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      std::vector<ParamValue> choices(mixed_precision_widths().begin(), mixed_precision_widths().end());
      o.grid["layer" + std::to_string(i) + "_width"] = choices;
      double b = HUGE_VAL;
      for (const auto w : mixed_precision_widths()) b = std::min(b, mixed_precision_layer_cost(layers[i], w));
      best += b;
    }
    o.known_minimum = best;
    return o;
  }
  qnum::detail::fail("unknown objective '", name, "' (allowed: branin, rastrigin, mixed-precision)");
}

}  // namespace qnum::search
