// The quantize pass (MASE's quantize_transform_pass, spec/system.md §3.1, without its
// pitfalls): selects layers by op type, by name or by regular expression and installs a
// QuantConfig on each; returns what it changed. The caller's config is never modified, so
// one config serves many trials.
//
//   {"by": "type" | "name" | "regex_name" (also "regex"),
//    "default": {"config": {"name": null}},         // anything not matched
//    "<key>":   {"config": {"name": "integer", "data_in_width": 8, ...}}, ...
//    "report":  true | false}                        // MASE's summary switch; accepted
//
// Layers: every module deriving from nn::Quantizable (linear, relu, gelu, tanh, layer_norm).
// Names are module paths ("2", "encoder.layer.0.attention.self.query"); MASE's FX node
// names (dots as underscores: "encoder_layer_0_attention_self_query") are accepted too, and
// so is the `seq_blocks` prefix of MASE's JSC models ("seq_blocks_2" is qnum's "2").
// By type, keys are MASE op names; a known op absent from the model matches nothing, an
// unknown op name is an error. A layer matched by two regexes is an error (no silent
// precedence); names or regexes matching nothing give a warning listing the layer names.
#pragma once

#include <cstdio>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/io/atomic_file.hpp"
#include "qnum/nn/module.hpp"
#include "qnum/passes/quant_config.hpp"

namespace qnum::passes {

/// One layer as the quantize pass saw it.
struct QuantizeRow {
  std::string path;           ///< module path ("" for the root)
  std::string op;             ///< MASE op name ("linear", "relu", "batch_norm1d", ...)
  std::string original_type;  ///< type before the pass ("Linear")
  std::string new_type;       ///< MASE's class name after it ("LinearInteger"), or the original
  bool changed = false;
  std::string config;  ///< the installed QuantConfig as text ("float" if unchanged)
};

/// What a quantize pass did: a row per leaf layer (in module order) and warnings.
struct QuantizeReport {
  std::vector<QuantizeRow> rows;
  std::vector<std::string> warnings;
  std::size_t changed() const {
    std::size_t n = 0;
    for (const auto& r : rows) n += r.changed;
    return n;
  }
};

/// MASE's node name of a module path: dots become underscores.
inline std::string node_name(const std::string& path) {
  std::string s = path;
  for (auto& c : s)
    if (c == '.') c = '_';
  return s;
}

/// MASE's ops that its quantize pass can transform (QUANTIZEABLE_OP plus softmax), and
/// qnum's `embedding` (an Embedding's weight table: qnum.torch's pass quantizes it).
inline const std::vector<std::string>& mase_quantizable_ops() {
  static const std::vector<std::string> ops{
      "add",      "bmm",  "conv1d", "conv2d",       "convtranspose2d", "matmul",     "mul",
      "linear",   "relu", "sub",    "batch_norm2d", "layer_norm",      "group_norm", "instance_norm2d",
      "rms_norm", "selu", "tanh",   "gelu",         "softsign",        "softplus",   "grouped_query_attention",
      "softmax",  "embedding"};
  return ops;
}

/// MASE's class name for op `op` quantized in `family` ("linear", "integer" -> "LinearInteger").
inline std::string mase_class_name(const std::string& op, const std::string& family) {
  static const std::map<std::string, std::string> ops{
      {"linear", "Linear"},        {"relu", "ReLU"},     {"gelu", "GELU"},      {"tanh", "Tanh"},
      {"layer_norm", "LayerNorm"}, {"matmul", "Matmul"}, {"softmax", "Softmax"}, {"bmm", "BMM"},
      {"conv1d", "Conv1d"},        {"conv2d", "Conv2d"}, {"embedding", "Embedding"}, {"rms_norm", "RMSNorm"}};
  static const std::map<std::string, std::string> families{{"integer", "Integer"},
                                                           {"minifloat_ieee", "MinifloatIEEE"},
                                                           {"minifloat_denorm", "MinifloatDenorm"},
                                                           {"log", "Log"},
                                                           {"block_fp", "BlockFP"},
                                                           {"block_minifloat", "BlockMinifloat"},
                                                           {"block_log", "BlockLog"},
                                                           {"binary", "Binary"},
                                                           {"residual_sign", "BinaryResidualSign"},
                                                           {"binarize", "Binarize"},
                                                           {"ternary", "Ternary"},
                                                           {"scale_integer", "ScaleInteger"},
                                                           {"mxint", "MXInt"},
                                                           {"mxfp", "MXFP"},
                                                           {"mxint_hardware", "MXIntHardware"}};
  const auto o = ops.find(op);
  const auto f = families.find(family);
  return (o != ops.end() ? o->second : op) + (f != families.end() ? f->second : family);
}

/// The family that names a quantized layer: its weight's, else its input's, else its output's.
inline std::string main_family(const nn::QuantConfig& q) {
  for (const auto* f : {&q.weight, &q.data_in, &q.data_out, &q.bias})
    if (*f) return std::string((*f)->family());
  return "";
}

namespace detail {

inline std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

/// The `config` table of entry `key` (MASE wraps it: {"config": {...}}; a bare table with a
/// `name` is accepted too).
inline const nlohmann::json& entry_config(const nlohmann::json& entry, const std::string& key) {
  qnum::detail::require(entry.is_object(), "quantize config: entry '", key, "' must be a table, got ", entry.dump());
  if (entry.contains("config")) {
    qnum::detail::require(entry.size() == 1, "quantize config: entry '", key,
                          "' has keys beside 'config'; put them inside its config table");
    return entry.at("config");
  }
  qnum::detail::require(entry.contains("name"), "quantize config: entry '", key,
                        "' needs a 'config' table (or at least a 'name')");
  return entry;
}

/// Whether config key `key` names the layer at `path` (path, MASE node name, seq_blocks alias).
inline bool name_matches(const std::string& key, const std::string& path) {
  if (key == path || key == node_name(path)) return true;
  for (const char* prefix : {"seq_blocks_", "seq_blocks."})
    if (key.starts_with(prefix) && key.substr(std::string(prefix).size()) == node_name(path)) return true;
  return false;
}

}  // namespace detail

/// A quantizable layer as the matcher sees it: any model's, qnum's or (through the Python
/// binding) PyTorch's.
struct QuantizableLayer {
  std::string path;                   ///< module path ("" for the root)
  std::string op;                     ///< MASE op name ("linear", "conv2d", ...)
  std::vector<std::string> operands;  ///< the operands it can quantize ("data_in", "weight", ...)
};

/// What the config gives each layer (in the order given): the entry that matched it
/// ("default" or none) and the resolved QuantConfig (nullopt: left alone).
struct QuantizeChoice {
  std::string key;
  std::optional<nn::QuantConfig> config;
};

struct QuantizeMatch {
  std::vector<QuantizeChoice> choices;
  std::vector<std::string> warnings;
};

/// The quantize pass's rules (see the header) applied to a list of layers: which entry
/// matches each one and the config it resolves to. Errors (unknown op, bad regex, a layer
/// matched twice, a bad format) are thrown before anything is returned.
inline QuantizeMatch match_quantize_config(const nlohmann::json& config, const std::vector<QuantizableLayer>& layers) {
  using qnum::detail::fail;
  using qnum::detail::require;
  require(config.is_object(), "quantize config must be a table/object, got ", config.dump());
  require(config.contains("by"), "quantize config: missing 'by' (\"type\", \"name\" or \"regex_name\")");
  require(config.at("by").is_string(), "quantize config: 'by' must be a string");
  const std::string by = config.at("by").get<std::string>();
  require(by == "type" || by == "name" || by == "regex_name" || by == "regex", "quantize config: unknown by = '", by,
          "' (allowed: type, name, regex_name, regex)");

  std::vector<std::pair<std::string, const nlohmann::json*>> entries;  // key -> config table
  const nlohmann::json* fallback = nullptr;
  for (const auto& [key, entry] : config.items()) {
    if (key == "by") continue;
    if (key == "report") {  // MASE's switch for its summary table; qnum's report is always made
      require(config.at(key).is_boolean(), "quantize config: 'report' must be true or false");
      continue;
    }
    if (key == "default") {
      fallback = &detail::entry_config(entry, key);
      continue;
    }
    if (by == "type") {
      const auto& ops = mase_quantizable_ops();
      require(std::find(ops.begin(), ops.end(), key) != ops.end(), "quantize config (by type): unknown op '", key,
              "' (known: ", detail::join(ops), ")");
    }
    entries.emplace_back(key, &detail::entry_config(entry, key));
  }

  std::vector<std::regex> patterns;
  if (by == "regex_name" || by == "regex")
    for (const auto& [key, cfg] : entries) {
      try {
        patterns.emplace_back(key);
      } catch (const std::regex_error& e) {
        fail("quantize config: bad regular expression '", key, "': ", e.what());
      }
    }

  QuantizeMatch out;
  std::vector<bool> used(entries.size(), false);
  std::vector<std::string> layer_names;
  for (const auto& layer : layers) {
    const std::string& path = layer.path;
    layer_names.push_back(path);
    const nlohmann::json* chosen = fallback;
    std::string chosen_key = fallback ? "default" : "";
    bool matched = false;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      bool hit = false;
      if (by == "type") hit = entries[i].first == layer.op;
      if (by == "name") hit = detail::name_matches(entries[i].first, path);
      if (!patterns.empty())
        hit = std::regex_match(path, patterns[i]) || std::regex_match(node_name(path), patterns[i]);
      if (!hit) continue;
      if (matched)
        fail("quantize config: layer '", path, "' matches both '", chosen_key, "' and '", entries[i].first,
             "'; make the entries exclusive");
      matched = true;
      chosen = entries[i].second;
      chosen_key = entries[i].first;
      used[i] = true;
    }
    std::optional<nn::QuantConfig> qc;
    if (chosen)
      qc = resolve_quant_config(*chosen, layer.operands,
                                "quantize config '" + chosen_key + "' for layer '" + path + "'");
    out.choices.push_back({chosen_key, qc});
  }
  if (by != "type")
    for (std::size_t i = 0; i < entries.size(); ++i)
      if (!used[i])
        out.warnings.push_back("quantize config: '" + entries[i].first +
                               "' matches no quantizable layer (layers: " + detail::join(layer_names) + ")");
  return out;
}

/// Applies quantize config `config` (see the header) to `model` in place and reports every
/// leaf layer. Nothing is changed unless the whole config is valid for the whole model.
inline QuantizeReport quantize(nn::Module& model, const nlohmann::json& config) {
  QuantizeReport report;
  std::vector<nn::Quantizable*> targets;
  std::vector<QuantizableLayer> layers;
  std::vector<std::size_t> row_of;  // report row of each quantizable layer
  for (auto& [path, m] : model.named_modules()) {
    if (!m->children().empty() && m->op_name().empty()) continue;  // containers
    auto* q = dynamic_cast<nn::Quantizable*>(m);
    QuantizeRow row{path, m->op_name(), m->type_name(), m->type_name(), false, "float"};
    if (q) {
      if (q->is_quantized()) row.original_type = mase_class_name(row.op, main_family(q->quant()));
      targets.push_back(q);
      layers.push_back({path, row.op, q->quant_operands()});
      row_of.push_back(report.rows.size());
    }
    report.rows.push_back(row);
  }
  // Resolve every layer first; install only when all are valid.
  QuantizeMatch match = match_quantize_config(config, layers);
  report.warnings = std::move(match.warnings);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto& qc = match.choices[i].config;
    if (!qc) continue;
    auto& row = report.rows[row_of[i]];
    row.changed = true;
    row.new_type = mase_class_name(row.op, main_family(*qc));
    row.config = qc->to_string();
  }
  for (std::size_t i = 0; i < targets.size(); ++i)
    if (const auto& qc = match.choices[i].config) targets[i]->set_quant(*qc);
  return report;
}

/// MASE's quantization histogram (summarize_quantization_analysis_pass): per original type,
/// its op, how many layers there are, how many changed and how many did not.
struct QuantizeSummaryRow {
  std::string original_type, op;
  std::size_t total = 0, changed = 0, unchanged = 0;
};

inline std::vector<QuantizeSummaryRow> summarize_quantization(const QuantizeReport& report) {
  std::vector<QuantizeSummaryRow> rows;
  for (const auto& r : report.rows) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const auto& s) { return s.original_type == r.original_type; });
    if (it == rows.end()) {
      rows.push_back({r.original_type, r.op, 0, 0, 0});
      it = rows.end() - 1;
    }
    ++it->total;
    ++(r.changed ? it->changed : it->unchanged);
  }
  return rows;
}

/// The summary as MASE prints it (an org-mode table).
inline std::string summary_table(const std::vector<QuantizeSummaryRow>& rows) {
  std::size_t w0 = 13, w1 = 2;
  for (const auto& r : rows) {
    w0 = std::max(w0, r.original_type.size());
    w1 = std::max(w1, r.op.size());
  }
  std::string out;
  char buf[512];
  auto line = [&] {
    out += "|" + std::string(w0 + 2, '-') + "+" + std::string(w1 + 2, '-') + "+-------+---------+-----------|\n";
  };
  std::snprintf(buf, sizeof buf, "| %-*s | %-*s | %5s | %7s | %9s |\n", int(w0), "Original type", int(w1), "OP",
                "Total", "Changed", "Unchanged");
  out += buf;
  line();
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "| %-*s | %-*s | %5zu | %7zu | %9zu |\n", int(w0), r.original_type.c_str(), int(w1),
                  r.op.c_str(), r.total, r.changed, r.unchanged);
    out += buf;
  }
  return out;
}

/// Writes MASE's quantize_table.csv (one row per layer) and quantize_histogram.csv (the
/// summary) into `dir` (atomically each).
inline void write_quantize_csvs(const QuantizeReport& report, const std::string& dir) {
  std::string table = "name,op,original_type,quantized_type,changed,config\n";
  for (const auto& r : report.rows)
    table += r.path + "," + r.op + "," + r.original_type + "," + r.new_type + "," + (r.changed ? "true" : "false") +
             ",\"" + r.config + "\"\n";
  write_file_atomic(dir + "/quantize_table.csv", table);
  std::string hist = "original_type,op,total,changed,unchanged\n";
  for (const auto& s : summarize_quantization(report))
    hist += s.original_type + "," + s.op + "," + std::to_string(s.total) + "," + std::to_string(s.changed) + "," +
            std::to_string(s.unchanged) + "\n";
  write_file_atomic(dir + "/quantize_histogram.csv", hist);
}

}  // namespace qnum::passes
