// lab2-compression: MASE lab 2's compression-aware NAS-BERT search, three curves per sampler.
//
//   nas            the NAS objective of lab2-nas: validation accuracy after training
//   compress       the same model after the compression pipeline (passes::compress:
//                  quantize, then prune): what the search sees is the compressed accuracy
//   compress-post  the same plus --post-epochs of training after compression (pruning masks
//                  and number formats kept: QAT)
//
// The pipeline defaults to MASE tutorial 3's: integer 8/4 on every Linear's data_in,
// weight and bias, then {0.5, l1-norm, local} weight pruning. --compress-config FILE
// replaces it: TOML or JSON with [passes.quantize]/[passes.prune] tables (qnum transform's)
// or top-level quantize/prune sections; it is checked on a small model before any training.
// With several --samplers (default tpe) each variant gets one curve per sampler
// ("<variant>-<sampler>"). Options and outputs otherwise as lab2-nas.
#include <string>
#include <vector>

#include "lab2_common.hpp"

namespace {

/// MASE tutorial 3's integer config (8/4 on data_in, weight, bias of every Linear) and
/// {0.5, l1-norm, local} weight pruning.
nlohmann::json default_compress_config() {
  return nlohmann::json::parse(R"({
    "quantize": {"by": "type", "default": {"config": {"name": "NA"}},
                 "linear": {"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4,
                                       "weight_width": 8, "weight_frac_width": 4,
                                       "bias_width": 8, "bias_frac_width": 4}}},
    "prune": {"weight": {"sparsity": 0.5, "method": "l1-norm", "scope": "local"}}})");
}

/// The compress sections of a config file ([passes.quantize]/[passes.prune] or top level).
nlohmann::json read_compress_config(const std::string& file) {
  auto j = qnum::cli::detail::toml_file_as_json(file);
  if (j.contains("passes")) j = j["passes"];
  qnum::detail::require(j.is_object(), "--compress-config: '", file, "' must hold a table");
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, v] : j.items()) {
    qnum::detail::require(key == "quantize" || key == "prune", "--compress-config: '", file, "': unknown section '",
                          key, "' (allowed: quantize, prune, under [passes] or at the top level)");
    out[key] = v;
  }
  qnum::detail::require(!out.empty(), "--compress-config: '", file, "' has neither a quantize nor a prune section");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "MASE lab 2: compression-aware NAS-BERT search (no compression / compressed / compressed + "
      "post-training), best accuracy so far vs trials",
      "lab2-compression"};
  qnum::labs::Lab2Options o;
  o.samplers = {"tpe"};
  std::string config_file;
  int post_epochs = 1;
  qnum::labs::add_lab2_options(app, o);
  app.add_option("--compress-config", config_file,
                 "quantize/prune config (TOML or JSON; default: integer 8/4 on Linear data_in/weight/bias and 50% "
                 "l1-norm local weight pruning)");
  app.add_option("--post-epochs", post_epochs, "training epochs after compression (the compress-post curve)")
      ->capture_default_str();

  return qnum::labs::run_main(app, argc, argv, [&] {
    qnum::detail::require(post_epochs >= 1, "--post-epochs must be >= 1, got ", post_epochs);
    nlohmann::json compress = config_file.empty() ? default_compress_config() : read_compress_config(config_file);
    if (compress.contains("prune") && compress["prune"].is_object() && !compress["prune"].contains("seed"))
      compress["prune"]["seed"] = o.seed;
    {  // Check the config on a small model before loading data or training anything.
      auto c = qnum::models::bert_config("bert:1-8-2-16");
      c.vocab_size = 8;
      qnum::models::BertForSequenceClassification probe(c, 0);
      qnum::passes::compress(probe, compress);
    }
    const auto samplers = qnum::labs::sorted_unique(o.samplers, "--samplers");
    std::vector<qnum::labs::Variant> variants;
    for (const auto& s : samplers) {
      const std::string suffix = samplers.size() > 1 ? "-" + s : "";
      variants.push_back({"nas" + suffix, s, std::nullopt, 0});
      variants.push_back({"compress" + suffix, s, compress, 0});
      variants.push_back({"compress-post" + suffix, s, compress, post_epochs});
    }
    std::vector<std::string> names;
    for (const auto& v : variants) names.push_back(v.name);
    const qnum::labs::Lab2 lab("lab2-compression", o, names);
    std::string trials_csv = qnum::labs::lab2_trials_csv_header();
    std::vector<qnum::labs::Lab2Curve> curves;
    for (const auto& v : variants) curves.push_back(qnum::labs::run_lab2_curve(lab, v, trials_csv));
    qnum::labs::finish_lab2(lab, curves, trials_csv,
                            "compression-aware NAS-BERT on " + lab.options().dataset +
                                ": no compression vs compressed vs compressed + post-training");
  });
}
