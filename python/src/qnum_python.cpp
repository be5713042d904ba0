// qnum._core: the Python extension over qnum's public C++ API. It only moves buffers: every
// value comes from qnum::Format (spec + policy) and the run-time dispatched kernels
// (qnum::kernel::dispatch), so Python gets the C++ library's bits. Arrays arrive C-contiguous
// float32 on the CPU (the Python layer checks dtypes and makes copies where needed) and are
// read and written in place, without copies; the GIL is released while a kernel runs.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <span>
#include <string>
#include <variant>

#include "qnum/core/heap.hpp"
#include "qnum/format/format.hpp"
#include "qnum/io/json.hpp"
#include "qnum/kernel/dispatch.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/passes/cost.hpp"
#include "qnum/passes/lora.hpp"
#include "qnum/passes/prune.hpp"
#include "qnum/passes/quant_config.hpp"
#include "qnum/passes/quantize.hpp"
#include "qnum/tensor/ops_quant.hpp"

namespace nb = nanobind;

namespace {

template <class T>
using InArray = nb::ndarray<const T, nb::c_contig, nb::device::cpu>;
template <class T>
using OutArray = nb::ndarray<T, nb::c_contig, nb::device::cpu>;

qnum::Shape shape_of(const auto& a) {
  qnum::Shape s(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i) s[i] = static_cast<std::int64_t>(a.shape(i));
  return s.empty() ? qnum::Shape{1} : s;  // a 0-d array is one element
}

template <class T>
std::span<const T> values(const InArray<T>& a) {
  return {a.data(), a.size()};
}
template <class T>
std::span<T> values(const OutArray<T>& a) {
  return {a.data(), a.size()};
}

qnum::Format make_format(const std::string& spec, const std::string& mode) {
  if (mode != "exact" && mode != "mase")
    throw qnum::Error("Format: mode '" + mode + "' is not one of exact, mase");
  return qnum::Format::parse(spec, mode == "mase" ? qnum::mase_compat : qnum::exact);
}

void require_size(std::size_t got, std::int64_t want, const char* what) {
  if (static_cast<std::int64_t>(got) != want)
    throw qnum::Error(std::string("quantize: ") + what + " has " + std::to_string(got) + " elements, expected " +
                      std::to_string(want));
}

void quantize_into(const qnum::Format& f, const InArray<float>& in, const OutArray<float>& out, int role) {
  if (role < 0 || role > 2) throw qnum::Error("quantize: role must be 0 (weight), 1 (activation) or 2 (bias)");
  const qnum::Shape shape = shape_of(in);
  require_size(out.size(), qnum::numel(f.output_shape(shape)), "the output");
  nb::gil_scoped_release unlocked;
  qnum::kernel::dispatch::quantize(f, values(in), values(out), shape, static_cast<qnum::Role>(role));
}

// Binary binarization with the caller's uniform draws u in [0, 1) (torch.rand_like's, so a
// stochastic call consumes torch's global generator exactly as MASE's does).
void binary_with_draws_into(const qnum::Format& f, const InArray<float>& in, const InArray<float>& u,
                            const OutArray<float>& out) {
  const auto* s = std::get_if<qnum::BinarySpec>(&f.spec);
  if (!s) throw qnum::Error("quantize with draws: '" + f.to_string() + "' is not a binary format");
  require_size(u.size(), static_cast<std::int64_t>(in.size()), "the uniform draws");
  require_size(out.size(), static_cast<std::int64_t>(in.size()), "the output");
  const qnum::Shape shape = shape_of(in);
  nb::gil_scoped_release unlocked;
  qnum::quantize(*s, f.policy, values(in), values(u), values(out), shape);
}

qnum::Format with_seed(const qnum::Format& f, std::uint64_t seed) {
  qnum::Format g = f;
  g.policy.seed = seed;
  return g;
}

// Families whose elements have codes of their own (block families' codes need the block's
// shared scale and are not offered here).
template <class S>
concept HasCodes = requires(const S& s, float x, std::uint32_t c) {
  { qnum::encode(s, x) } -> std::convertible_to<std::uint32_t>;
  { qnum::decode(s, c) } -> std::convertible_to<float>;
};

template <class Fn>
void with_codes(const qnum::Format& f, const char* what, Fn&& fn) {
  std::visit(
      [&](const auto& s) {
        using S = std::decay_t<decltype(s)>;
        if constexpr (HasCodes<S>) {
          if (f.policy.is_mase())
            throw qnum::Error(std::string(what) + ": codes are defined for mode exact; '" + f.to_string() +
                              "' is mode mase");
          fn(s);
        } else {
          throw qnum::Error(std::string(what) + ": " + std::string(s.name) +
                            " has no per-element codes (block and scaled families share a scale per block)");
        }
      },
      f.spec);
}

void encode_into(const qnum::Format& f, const InArray<float>& in, const OutArray<std::uint32_t>& out) {
  require_size(out.size(), static_cast<std::int64_t>(in.size()), "the code array");
  with_codes(f, "encode", [&](const auto& s) {
    const auto x = values(in);
    const auto c = values(out);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if constexpr (requires { qnum::encode(s, x[i], f.policy); })
        c[i] = qnum::encode(s, x[i], f.policy);
      else
        c[i] = qnum::encode(s, x[i]);
    }
  });
}

void decode_into(const qnum::Format& f, const InArray<std::uint32_t>& in, const OutArray<float>& out) {
  require_size(out.size(), static_cast<std::int64_t>(in.size()), "the output");
  with_codes(f, "decode", [&](const auto& s) {
    const auto c = values(in);
    const auto y = values(out);
    for (std::size_t i = 0; i < c.size(); ++i) y[i] = qnum::decode(s, c[i]);
  });
}

nb::dict describe(const qnum::Format& f) {
  const auto info = f.info();
  const auto range = qnum::ste_range(f);
  nb::dict d;
  d["format"] = f.to_string();
  d["family"] = std::string(f.family());
  d["mode"] = f.policy.is_mase() ? "mase" : "exact";
  d["bits_per_value"] = info.bits_per_value;
  d["min_positive"] = info.min_positive;
  d["max"] = info.max;
  d["distinct_values"] = info.distinct_values;
  d["value_set"] = info.value_set;
  d["rounding"] = std::string(qnum::to_string(f.policy.rounding));
  d["overflow"] = std::string(qnum::to_string(f.policy.overflow));
  d["ste"] = std::string(qnum::to_string(f.policy.ste));
  d["ste_range"] = nb::make_tuple(range.lo, range.hi);
  return d;
}

nb::list key_list(const std::vector<qnum::KeyDoc>& keys) {
  nb::list l;
  for (const auto& k : keys) {
    nb::dict d;
    d["key"] = k.key;
    d["default"] = k.default_value;
    d["help"] = k.help;
    l.append(d);
  }
  return l;
}

nlohmann::json json_of(const std::string& text, const std::string& where) {
  try {
    return qnum::io::parse_json(text, where);
  } catch (const nlohmann::json::exception& e) {
    throw qnum::Error(where + ": the config is not JSON-like: " + e.what());
  }
}

nb::dict quant_config_dict(const std::optional<qnum::nn::QuantConfig>& q) {
  nb::dict d;
  auto put = [&](const char* name, const std::optional<qnum::Format>& f) {
    d[name] = f ? nb::cast(*f) : nb::none();
  };
  put("data_in", q ? q->data_in : std::nullopt);
  put("weight", q ? q->weight : std::nullopt);
  put("bias", q ? q->bias : std::nullopt);
  put("data_out", q ? q->data_out : std::nullopt);
  d["data_in_role"] = static_cast<int>(q ? q->data_in_role : qnum::Role::activation);
  d["text"] = q ? q->to_string() : std::string("float");
  return d;
}

// A MASE quantize config (JSON text of the Python dict) resolved by the quantize pass's own
// rules: {"data_in": Format | None, "weight": ..., "bias": ..., "data_out": ..., "data_in_role": 0 | 1}.
nb::dict resolve_quant_config(const std::string& config_json, const std::string& where) {
  const auto cfg = json_of(config_json, where);
  return quant_config_dict(qnum::passes::resolve_quant_config(cfg, {"data_in", "weight", "bias", "data_out"}, where));
}

using LayerTuple = std::tuple<std::string, std::string, std::vector<std::string>>;  // path, op, operands

// The quantize pass's matcher (passes::match_quantize_config) over a model's layers as the
// Python side lists them: for each layer (entry key, resolved config dict or None, MASE's
// class name), and the warnings.
nb::tuple match_quantize(const std::string& config_json, const std::vector<LayerTuple>& layers) {
  const auto cfg = json_of(config_json, "quantize_transform_pass");
  std::vector<qnum::passes::QuantizableLayer> in;
  for (const auto& [path, op, operands] : layers) in.push_back({path, op, operands});
  const auto match = qnum::passes::match_quantize_config(cfg, in);
  nb::list out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const auto& c = match.choices[i];
    const std::string type =
        c.config ? qnum::passes::mase_class_name(in[i].op, qnum::passes::main_family(*c.config)) : std::string();
    out.append(nb::make_tuple(c.key, c.config ? nb::object(quant_config_dict(c.config)) : nb::none(), type));
  }
  return nb::make_tuple(out, match.warnings);
}

// MASE's summary table over rows (original type, op, changed).
std::string quantize_summary(const std::vector<std::tuple<std::string, std::string, bool>>& rows) {
  qnum::passes::QuantizeReport report;
  for (const auto& [type, op, changed] : rows) report.rows.push_back({"", op, type, type, changed, ""});
  return qnum::passes::summary_table(qnum::passes::summarize_quantization(report));
}

nb::dict prune_side(const qnum::passes::PruneSpec& s) {
  nb::dict d;
  d["sparsity"] = s.sparsity;
  d["method"] = s.method == qnum::passes::PruneMethod::random ? "random" : "l1-norm";
  d["scope"] = s.scope == qnum::passes::PruneScope::local ? "local" : "global";
  d["text"] = s.to_string();
  return d;
}

qnum::passes::PruneSpec prune_spec_of(double sparsity, const std::string& method, const std::string& scope) {
  nlohmann::json j{{"sparsity", sparsity}, {"method", method}, {"scope", scope}};
  return qnum::passes::detail::parse_prune_side(j, "side");
}

// MASE's prune config checked by the C++ pass's parser: {"weight": {...}, "activation": {...}, "seed": n}.
nb::dict parse_prune_config(const std::string& config_json) {
  const auto c = qnum::passes::parse_prune_config(json_of(config_json, "prune_transform_pass"));
  nb::dict d;
  d["weight"] = prune_side(c.weight);
  d["activation"] = prune_side(c.activation);
  d["seed"] = c.seed;
  return d;
}

// The pass's weight selection (passes::select_weight_prune): per layer the flat indices to zero.
std::vector<std::vector<std::size_t>> select_weight_prune(double sparsity, const std::string& method,
                                                          const std::string& scope, std::uint64_t seed,
                                                          const std::vector<InArray<float>>& weights) {
  const auto spec = prune_spec_of(sparsity, method, scope);
  std::vector<std::span<const float>> w;
  for (const auto& a : weights) w.push_back(values(a));
  nb::gil_scoped_release unlocked;
  return qnum::passes::select_weight_prune(spec, seed, w);
}

void activation_prune_mask_into(double sparsity, const std::string& method, const std::string& scope,
                                std::uint64_t seed, std::uint64_t call, float threshold, const InArray<float>& x,
                                std::size_t samples, const OutArray<float>& mask) {
  const auto spec = prune_spec_of(sparsity, method, scope);
  require_size(mask.size(), static_cast<std::int64_t>(x.size()), "the mask");
  if (samples == 0 || x.size() % samples != 0) throw qnum::Error("activation prune: samples must divide the size");
  nb::gil_scoped_release unlocked;
  const auto m = qnum::passes::activation_prune_mask(spec, seed, call, threshold, values(x), samples);
  std::copy(m.begin(), m.end(), mask.data());
}

float activation_prune_threshold(double sparsity, const InArray<float>& magnitudes) {
  std::vector<float> seen(magnitudes.data(), magnitudes.data() + magnitudes.size());
  return qnum::passes::activation_prune_threshold(sparsity, seen);
}

nb::dict parse_lora_config(const std::string& config_json) {
  const auto c = qnum::passes::parse_lora_config(json_of(config_json, "insert_lora_adapter_transform_pass"));
  nb::dict d;
  d["rank"] = c.rank;
  d["alpha"] = c.alpha > 0.0 ? c.alpha : static_cast<double>(c.rank);
  d["scaling"] = (c.alpha > 0.0 ? c.alpha : static_cast<double>(c.rank)) / static_cast<double>(c.rank);
  d["dropout"] = c.dropout;
  d["target"] = c.target;
  d["trainable"] = c.trainable;
  d["seed"] = c.seed;
  return d;
}

// The cost model's rule for an op with weights (passes::weighted_op_cost); rows are
// (node, op, macs, bias_adds, bits_weight, bits_data_in, adapter_macs) and come back as
// dicts, with the C++ report's text table.
nb::tuple weighted_costs(const std::vector<std::tuple<std::string, std::string, double, double, double, double, double>>& rows) {
  qnum::passes::CostReport report;
  for (const auto& [node, op, macs, bias, bw, bin, lora] : rows)
    report.rows.push_back(qnum::passes::weighted_op_cost(node, op, macs, bias, bw, bin, lora));
  nb::list out;
  for (const auto& r : report.rows) {
    nb::dict d;
    d["node"] = r.node;
    d["op"] = r.op;
    d["macs"] = r.macs;
    d["flops_forward"] = r.flops_forward;
    d["flops_backward"] = r.flops_backward;
    d["bitops_forward"] = r.bitops_forward;
    d["bitops_backward"] = r.bitops_backward;
    d["bits_weight"] = r.bits_weight;
    d["bits_data_in"] = r.bits_data_in;
    out.append(d);
  }
  return nb::make_tuple(out, report.table());
}

nb::dict formats() {
  nb::list families;
  for (const auto& fam : qnum::format_families()) {
    nb::dict d;
    d["name"] = std::string(fam.name);
    d["keys"] = key_list(fam.keys);
    d["help"] = std::string(fam.help);
    families.append(d);
  }
  nb::list presets;
  for (const auto& p : qnum::format_presets()) {
    nb::dict d;
    d["name"] = std::string(p.name);
    d["format"] = qnum::Format(p.spec).to_string();
    d["help"] = std::string(p.help);
    presets.append(d);
  }
  nb::dict out;
  out["families"] = families;
  out["presets"] = presets;
  out["policy_keys"] = key_list(qnum::policy_key_docs());
  return out;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "qnum's C++ formats and kernels (use the qnum package, not this module)";
  // qnum.mase caches Formats in module-level dicts that outlive nanobind's shutdown check.
  nb::set_leak_warnings(false);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const qnum::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  nb::class_<qnum::Format>(m, "Format")
      .def(nb::new_(&make_format), nb::arg("spec"), nb::arg("mode") = "exact")
      .def("__str__", &qnum::Format::to_string)
      .def("__eq__", [](const qnum::Format& a, const qnum::Format& b) { return a == b; })
      .def_prop_ro("family", [](const qnum::Format& f) { return std::string(f.family()); })
      .def_prop_ro("bits_per_value", &qnum::Format::bits_per_value)
      .def_prop_ro("is_mase", [](const qnum::Format& f) { return f.policy.is_mase(); })
      .def("output_shape", &qnum::Format::output_shape)
      .def("describe", &describe)
      .def("kernel_path",
           [](const qnum::Format& f, const qnum::Shape& shape, int role) {
             return std::string(qnum::kernel::to_string(
                 qnum::kernel::dispatch::quantize_path(f, shape, static_cast<qnum::Role>(role))));
           })
      .def("quantize_into", &quantize_into, nb::arg("x"), nb::arg("out"), nb::arg("role"))
      .def("binary_with_draws_into", &binary_with_draws_into)
      .def("with_seed", &with_seed)
      .def("encode_into", &encode_into)
      .def("decode_into", &decode_into);

  m.def("formats", &formats);
  m.def("resolve_quant_config", &resolve_quant_config);
  m.def("match_quantize", &match_quantize);
  m.def("quantize_summary", &quantize_summary);
  m.def("parse_prune_config", &parse_prune_config);
  m.def("select_weight_prune", &select_weight_prune);
  m.def("activation_prune_mask_into", &activation_prune_mask_into);
  m.def("activation_prune_threshold", &activation_prune_threshold);
  m.def("parse_lora_config", &parse_lora_config);
  m.def("weighted_costs", &weighted_costs);
  m.def("derive_seed", &qnum::nn::detail::derive_seed);
  m.def("matmul_right_groups_along_k", [](const qnum::Format& f, std::int64_t rank) {
    return qnum::nn::Matmul::right_groups_along_k(f, rank);
  });
  m.def("set_num_threads", &qnum::set_num_threads, nb::arg("n"));
  m.def("num_threads", &qnum::num_threads);
  m.def("retain_freed_memory", &qnum::retain_freed_memory);
  m.def("isa", [] { return std::string(qnum::kernel::dispatch::to_string(qnum::kernel::dispatch::selected_isa())); });
}
