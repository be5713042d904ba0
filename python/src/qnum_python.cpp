// qnum._core: the Python extension over qnum's public C++ API. It only moves buffers: every
// value comes from qnum::Format (spec + policy) and the run-time dispatched kernels
// (qnum::kernel::dispatch), so Python gets the C++ library's bits. Arrays arrive C-contiguous
// float32 on the CPU (the Python layer checks dtypes and makes copies where needed) and are
// read and written in place, without copies; the GIL is released while a kernel runs.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
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
#include "qnum/passes/quant_config.hpp"
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

// A MASE quantize config (JSON text of the Python dict) resolved by the quantize pass's own
// rules: {"data_in": Format | None, "weight": ..., "bias": ..., "data_out": ..., "data_in_role": 0 | 1}.
nb::dict resolve_quant_config(const std::string& config_json, const std::string& where) {
  nlohmann::json cfg;
  try {
    cfg = qnum::io::parse_json(config_json, where);
  } catch (const nlohmann::json::exception& e) {
    throw qnum::Error(where + ": the config is not JSON-like: " + e.what());
  }
  const auto q = qnum::passes::resolve_quant_config(cfg, {"data_in", "weight", "bias", "data_out"}, where);
  nb::dict d;
  auto put = [&](const char* name, const std::optional<qnum::Format>& f) {
    d[name] = f ? nb::cast(*f) : nb::none();
  };
  put("data_in", q ? q->data_in : std::nullopt);
  put("weight", q ? q->weight : std::nullopt);
  put("bias", q ? q->bias : std::nullopt);
  put("data_out", q ? q->data_out : std::nullopt);
  d["data_in_role"] = static_cast<int>(q ? q->data_in_role : qnum::Role::activation);
  return d;
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
  m.def("set_num_threads", &qnum::set_num_threads, nb::arg("n"));
  m.def("num_threads", &qnum::num_threads);
  m.def("retain_freed_memory", &qnum::retain_freed_memory);
  m.def("isa", [] { return std::string(qnum::kernel::dispatch::to_string(qnum::kernel::dispatch::selected_isa())); });
}
