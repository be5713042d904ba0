// `qnum search --config search.toml`: a mixed-precision search on a trained checkpoint of any
// registered model: what the config's top level names (model, dataset, checkpoint, output
// folder) read against the registry and the checkpoint, the model rebuilt from it, its data
// loaded, and the evaluator of its kind; the config's search tables, the study and its reports
// are MASE's search configs in the search layer (qnum/search/mase_search.hpp, where the keys
// are listed).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "qnum/io/config_file.hpp"
#include "qnum/io/mase_config.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/pipeline/checkpoint.hpp"
#include "qnum/pipeline/datasets.hpp"
#include "qnum/search/mase_search.hpp"

namespace qnum::cli {

/// Command-line values that override the config's (unset = the config's).
struct SearchOverrides : search::StudyOverrides {
  std::optional<std::string> dataset, load, output_dir;  ///< MASE's `ch search --dataset/--load/--project-dir`
  std::optional<std::string> model;
  std::optional<std::int64_t> max_length, limit;  ///< text models: tokens per text, rows per split
  std::optional<std::string> tensorboard;         ///< the trials as a TensorBoard log folder
};

namespace detail_search_config {

inline search::SearchJob read_job(const nlohmann::json& cfg, const SearchOverrides& ov, const std::string& where) {
  auto str = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys)
      if (cfg.contains(k)) {
        qnum::detail::require(cfg[k].is_string(), where, ": '", k, "' must be a string");
        return cfg[k].get<std::string>();
      }
    return std::string();
  };
  search::SearchJob job;
  job.model = ov.model.value_or(str({"model"}));
  job.dataset = ov.dataset.value_or(str({"dataset"}));
  job.load = ov.load.value_or(str({"load_name", "load"}));
  // MASE's project: <project_dir or mase_output>/<project>/software/search_ckpts (output_dir wins).
  std::string out_text = ov.output_dir.value_or(str({"output_dir"}));
  if (out_text.empty() && cfg.contains("project"))
    out_text = mase::project_output_dir(str({"project_dir"}), str({"project"}), mase::Command::search);
  if (out_text.empty()) out_text = str({"project_dir"});
  qnum::detail::require(!job.model.empty(), where, ": 'model' is required (or --model)");
  qnum::detail::require(!job.load.empty(), where, ": 'load_name' (the trained checkpoint to search from) is required");
  qnum::detail::require(!out_text.empty(), where, ": 'output_dir' (or MASE's project / project_dir) is required");
  job.out_dir = out_text;
  if (ov.tensorboard) job.tensorboard_dir = *ov.tensorboard;
  job.batch = cfg.value("batch_size", std::int64_t{1024});
  qnum::detail::require(job.batch >= 1, where, ": batch_size must be >= 1");
  job.max_length = ov.max_length.value_or(cfg.value("max_length", std::int64_t{0}));
  job.limit = ov.limit.value_or(cfg.value("limit", std::int64_t{0}));
  qnum::detail::require(job.max_length == 0 || job.max_length >= 2, where, ": max_length must be >= 2 ([CLS] and [SEP])");
  qnum::detail::require(job.limit >= 0, where, ": limit must be >= 0");
  const auto& spec = pipeline::model_spec(job.model);  // unknown names fail here, listing the known ones
  if (spec.input == pipeline::InputKind::features)
    qnum::detail::require(!cfg.contains("max_length") && !cfg.contains("limit") && !ov.max_length && !ov.limit, where,
            ": max_length and limit apply to text models, not to ", job.model);
  job.meta = train::read_checkpoint_meta(job.load);
  pipeline::require_checkpoint_of(job.model, job.load, job.meta);
  if (job.dataset.empty()) job.dataset = job.meta.value("dataset", std::string());
  qnum::detail::require(!job.dataset.empty(), where, ": 'dataset' is required (the checkpoint names none)");
  pipeline::require_matching_data(job.model, job.dataset);
  if (spec.input == pipeline::InputKind::tokens && job.max_length == 0) {
    job.max_length = 512;
    if (job.meta.contains("config") && job.meta["config"].value("max_length", 0) >= 2)
      job.max_length = job.meta["config"]["max_length"].get<std::int64_t>();
  }
  return job;
}

/// The evaluator of the trials on `split`: fresh copies of the checkpoint, the forward and the
/// BitOPs example of the model's kind, fine-tuning from the model's default recipe.
template <class Data>
search::BasicQuantizedEvaluator<Data> trial_evaluator(const search::SearchJob& job,
                                                      const std::function<std::shared_ptr<nn::Module>()>& fresh,
                                                      const Data& split) {
  constexpr bool tokens = std::is_same_v<Data, data::TokenDataset>;
  search::BasicQuantizedEvaluator<Data> ev;
  ev.fresh_model = fresh;
  if constexpr (tokens) {
    ev.forward_of = [](const std::shared_ptr<nn::Module>& m) {
      auto bert = std::dynamic_pointer_cast<models::BertForSequenceClassification>(m);
      qnum::detail::require(bert != nullptr, "search: a text model that is not BERT");
      return models::bert_forward(bert);
    };
    ev.example = pipeline::trace_example(
        pipeline::Classifier{nullptr, nullptr, pipeline::InputKind::tokens, nullptr}, 1,
        std::max<std::int64_t>(1, std::min(job.max_length, split.size() > 0 ? split.length(0) : job.max_length)),
        &split);
  } else {
    ev.example = Tensor::zeros({1, models::kJscFeatures});  // BitOPs per sample
  }
  ev.batch_size = job.batch;
  ev.finetune = pipeline::default_recipe(job.model);
  if constexpr (tokens) ev.finetune.max_length = job.max_length;
  ev.finetune.dataset = job.dataset;
  ev.finetune.precision = train::checkpoint_precision(job.meta);
  return ev;
}

}  // namespace detail_search_config

/// Runs the search of config file `path` (see the file comment); prints a summary (or one
/// JSON object) on stdout.
inline void run_search_config(const std::string& path, const SearchOverrides& ov, bool json_out) {
  using namespace detail_search_config;
  using nlohmann::json;
  using qnum::detail::require;
  const json cfg = io::toml_file_as_json(path);
  const std::string where = path;
  // MASE's keys search does not read: one line each (qnum/io/mase_config.hpp), then run.
  auto reads = mase::keys_read_by(mase::Command::search);
  reads.insert(reads.end(), {"max_length", "limit"});
  for (const auto& n : mase::plan_top_level(cfg, mase::Command::search, where, reads).notes)
    std::cerr << "note: " << where << ": " << n << "\n";
  const search::SearchJob job = read_job(cfg, ov, where);
  require(cfg.contains("search") && cfg["search"].is_object(), where, ": a [search] table is required");
  const json& s = cfg["search"];
  io::require_keys(s, where + " [search]", {"search_space", "strategy"});
  require(s.contains("search_space"), where, ": [search.search_space] is required");
  const std::string spw = where + " [search.search_space]", stw = where + " [search.strategy]";
  const json strat = search::read_strategy(s.value("strategy", json::object()), stw);

  // Everything about the space is checked on the model before any data is read.
  const pipeline::Classifier base = pipeline::load_classifier(job.model, job.load, job.meta);
  const auto fresh = pipeline::copies_of(job.model, job.meta, base.module->state_dict());
  const auto space = search::read_space(*base.module, s["search_space"], spw);
  search::check_every_choice(space, fresh, spw);
  search::StudyPlan plan = search::read_plan(strat, ov, space, stw);
  plan.space_name = s["search_space"]["name"].get<std::string>();

  if (cfg.contains("threads")) set_num_threads(cfg["threads"].get<int>());
  // Trials are scored (and fine-tuned) in the precision the checkpoint's model was made in.
  const std::string precision = train::checkpoint_precision(job.meta);
  const PrecisionScope scope(parse_precision(precision));
  if (matmul_precision() != Precision::fp32)
    std::cerr << "note: trials run in precision " << precision << " (the checkpoint's)\n";
  pipeline::with_splits(base.input, job.dataset, job.max_length, job.limit, job.load, [&](const auto& data) {
    const auto [split, train] = search::plan_splits(plan, data);
    auto ev = trial_evaluator(job, fresh, split);
    search::apply_plan(ev, plan, split, train);
    search::run_study(job, plan, space, ev, json_out);
  });
}

}  // namespace qnum::cli
