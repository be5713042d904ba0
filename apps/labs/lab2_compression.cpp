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
// ("<variant>-<sampler>"). Options and outputs otherwise as lab2-nas; the best compressed
// model (compress and compress-post curves) is saved as <dir>/best.safetensors.
//
// --load CKPT is MASE lab 2's task 2 on one trained model (lab2-nas's best, or any BERT
// checkpoint): no search; the model as loaded, compressed with the config, and compressed
// plus --post-epochs of training at --finetune-learning-rate, each with its validation and
// test accuracy in <dir>/results.csv and on stdout; the better compressed model (validation
// accuracy; ties: without post-training) is saved as <dir>/best.safetensors for lab3 --load.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "labs.hpp"
#include "lab2_common.hpp"

namespace qnum::labs::lab2_compression {

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
  auto j = qnum::io::toml_file_as_json(file);
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

/// One row of the --load results: a model and its accuracies.
struct Stage {
  std::string name;
  std::shared_ptr<qnum::labs::TextLab::Model> model;
  double val = 0, test = 0, sparsity = 0;
};

/// --load: the loaded model as is, compressed, and compressed + post-training (file comment).
void compress_loaded(const CLI::App& app, const qnum::labs::CommonOptions& common, const qnum::labs::TextOptions& text,
                     const std::string& load, const nlohmann::json& compress, int post_epochs) {
  for (const auto& name : qnum::labs::lab2_search_option_names())
    qnum::detail::require(app.count(name) == 0, name, " applies to the search; --load compresses the loaded model");
  qnum::detail::require(app.count("--epochs") == 0, "--epochs applies to the search; with --load, --post-epochs sets ",
                        "the training after compression");
  // The checkpoint is checked before the data are read or any folder is made.
  qnum::pipeline::require_checkpoint_of(common.model, load, qnum::train::read_checkpoint_meta(load));
  qnum::labs::TextLab lab("lab2-compression", qnum::labs::with_text_defaults(app, common), text);
  lab.load_start(load);
  std::vector<Stage> stages;
  auto measure = [&](Stage s) {
    s.val = lab.val_accuracy(s.model);
    s.test = lab.test_accuracy(s.model);
    lab.note(s.name + ": validation accuracy " + qnum::labs::LabBase::fmt(s.val) + ", test accuracy " +
             qnum::labs::LabBase::fmt(s.test));
    stages.push_back(std::move(s));
  };
  measure({"loaded", lab.trained_copy()});
  for (const int post : {0, post_epochs}) {
    auto m = lab.trained_copy();
    const auto report = qnum::labs::compress_model(lab, *m, compress);
    if (post > 0) lab.finetune(m, "post", post);
    measure({post > 0 ? "compressed+post" : "compressed", m, 0, 0, report.prune ? report.prune->weight_sparsity() : 0});
  }
  const Stage& best = stages[2].val > stages[1].val ? stages[2] : stages[1];
  const auto file = lab.save_model(*best.model, "best",
                                   {{"lab2-compression", {{"loaded", load}, {"stage", best.name}, {"compress", compress},
                                                          {"val_accuracy", best.val}, {"test_accuracy", best.test}}}});

  std::string csv = "model,val_accuracy,test_accuracy,parameters,weight_sparsity\n";
  std::printf("lab2-compression  %s, %s compressed, %d post-compression epoch(s)\n\n%-16s %9s %9s %11s %9s\n",
              lab.data().summary().c_str(), load.c_str(), post_epochs, "model", "val_acc", "test_acc", "parameters",
              "sparsity");
  for (const auto& s : stages) {
    const long long params = s.model->num_parameters();
    csv += s.name + "," + qnum::labs::LabBase::fmt(s.val, 6) + "," + qnum::labs::LabBase::fmt(s.test, 6) + "," +
           std::to_string(params) + "," + qnum::labs::LabBase::fmt(s.sparsity, 6) + "\n";
    std::printf("%-16s %9.4f %9.4f %11lld %9.4f\n", s.name.c_str(), s.val, s.test, params, s.sparsity);
  }
  qnum::write_file_atomic(lab.dir() / "results.csv", csv);
  std::printf("\nresults  %s\nbest     %s (%s, validation accuracy %.4f, test accuracy %.4f; --load it in lab3)\n",
              (lab.dir() / "results.csv").string().c_str(), file.string().c_str(), best.name.c_str(), best.val,
              best.test);
}


int run(int argc, char** argv) {
  CLI::App app{
      "MASE lab 2: compression-aware NAS-BERT search (no compression / compressed / compressed + "
      "post-training), best accuracy so far vs trials; with --load, the same three on one trained model",
      "lab2-compression"};
  qnum::labs::CommonOptions common;
  qnum::labs::TextOptions text;
  qnum::labs::Lab2Options o;
  o.samplers = {"tpe"};
  std::string config_file, load;
  int post_epochs = 1;
  qnum::labs::add_lab2_options(app, common, text, o);
  app.get_option("--finetune-learning-rate")
      ->description("learning rate of the training after compression (default: a tenth of the model's recipe)");
  app.add_option("--load", load, "compress this trained model (e.g. lab2-nas's best.safetensors) instead of searching");
  app.add_option("--compress-config", config_file,
                 "quantize/prune config (TOML or JSON; default: integer 8/4 on Linear data_in/weight/bias and 50% "
                 "l1-norm local weight pruning)");
  app.add_option("--post-epochs", post_epochs, "training epochs after compression (the compress-post curve)")
      ->capture_default_str();

  return qnum::labs::run_main(app, argc, argv, [&] {
    qnum::detail::require(post_epochs >= 1, "--post-epochs must be >= 1, got ", post_epochs);
    nlohmann::json compress = config_file.empty() ? default_compress_config() : read_compress_config(config_file);
    if (compress.contains("prune") && compress["prune"].is_object() && !compress["prune"].contains("seed"))
      compress["prune"]["seed"] = common.seed;
    {  // Check the config on a small model before loading data or training anything.
      auto c = qnum::models::bert_config("bert:1-8-2-16");
      c.vocab_size = 8;
      qnum::models::BertForSequenceClassification probe(c, 0);
      const std::vector<std::int64_t> ids{2, 3}, mask{1, 1}, types{0, 0};
      qnum::passes::compress(probe, compress, [&] { probe.forward(qnum::models::BertInput{1, 2, ids, mask, types}); });
    }
    if (!load.empty()) return compress_loaded(app, common, text, load, compress, post_epochs);
    const auto samplers = qnum::labs::sorted_unique(o.samplers, "--samplers");
    std::vector<qnum::labs::Variant> variants;
    for (const auto& s : samplers) {
      const std::string suffix = samplers.size() > 1 ? "-" + s : "";
      variants.push_back({"nas" + suffix, s, std::nullopt, 0, false});
      variants.push_back({"compress" + suffix, s, compress, 0, true});
      variants.push_back({"compress-post" + suffix, s, compress, post_epochs, true});
    }
    std::vector<std::string> names;
    for (const auto& v : variants) names.push_back(v.name);
    qnum::labs::Lab2 lab("lab2-compression", app, common, text, o, names);
    std::string trials_csv = qnum::labs::lab2_trials_csv_header();
    std::vector<qnum::labs::Lab2Curve> curves;
    for (const auto& v : variants) curves.push_back(qnum::labs::run_lab2_curve(lab, v, trials_csv));
    qnum::labs::finish_lab2(lab, curves, trials_csv,
                            "compression-aware NAS-BERT on " + lab.lab().options().dataset +
                                ": no compression vs compressed vs compressed + post-training");
  });
}

}  // namespace qnum::labs::lab2_compression
