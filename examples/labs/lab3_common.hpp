// What the Lab 3 programs (lab3-mixed-precision, lab3-format-search) share: one study per
// curve over a mixed-precision space on the trained fp32 model (accuracy on the validation
// split, a fresh quantized copy per trial), the best trial re-measured on the test split,
// and the outputs: results.csv (trial, then one best-so-far column per curve), trials.csv
// (every trial: curve, number, accuracy, bits, BitOPs, parameters), plot.gp/plot.png.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab_common.hpp"
#include "qnum/search/grid_sampler.hpp"
#include "qnum/search/quantized_objective.hpp"
#include "qnum/search/random_sampler.hpp"
#include "qnum/search/spaces.hpp"
#include "qnum/search/storage_url.hpp"
#include "qnum/search/study.hpp"
#include "qnum/search/tpe.hpp"

namespace qnum::labs {

/// The search options both Lab 3 programs take.
struct SearchOptions {
  int trials = 20;
  std::uint64_t search_seed = 0;
  int finetune_epochs = 0;  ///< > 0: fine-tune every trial's model (QAT) before measuring
  std::string layers = ".*";
  std::string storage = "memory";
};

inline void add_search_options(CLI::App& app, SearchOptions& s) {
  app.add_option("--trials", s.trials, "trials per curve")->capture_default_str();
  app.add_option("--search-seed", s.search_seed, "seed of the samplers")->capture_default_str();
  app.add_option("--finetune-epochs", s.finetune_epochs,
                 "fine-tune each trial's quantized model for this many epochs before measuring (0 = PTQ)")
      ->capture_default_str();
  app.add_option("--layers", s.layers, "regular expression selecting the Linear layers searched (module paths)")
      ->capture_default_str();
  app.add_option("--storage", s.storage, "study storage: memory, sqlite:///file.db, postgresql://...")
      ->capture_default_str();
}

inline void validate(const SearchOptions& s) {
  qnum::detail::require(s.trials >= 1, "--trials must be >= 1, got ", s.trials);
  qnum::detail::require(s.finetune_epochs >= 0, "--finetune-epochs must be >= 0, got ", s.finetune_epochs);
}

/// One curve: its study's trials and the best trial measured on the test split.
struct Curve {
  std::string name, sampler;
  std::vector<double> accuracy, best;  ///< per trial (validation); nan for failed trials
  std::int64_t best_number = -1;
  std::string best_params;
  search::QuantizedMetrics best_val, best_test;
};

/// A parameter value as CSV text: strings bare (not Python-quoted), numbers as Optuna prints.
inline std::string param_text(const search::ParamValue& v) {
  return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : search::to_string(v);
}

inline std::shared_ptr<search::Sampler> make_sampler(const std::string& name, const search::MixedPrecisionSpace& space,
                                                     std::uint64_t seed) {
  if (name == "tpe") return std::make_shared<search::TPESampler>(seed);
  if (name == "random") return std::make_shared<search::RandomSampler>(seed);
  if (name == "grid") return std::make_shared<search::GridSampler>(space.grid(), static_cast<std::uint32_t>(seed));
  qnum::detail::fail("unknown sampler '", name, "' (allowed: tpe, random, grid)");
}

/// The evaluator of `lab`'s trained model on split `split` (fine-tuning as the options say).
inline search::QuantizedEvaluator lab_evaluator(const Lab& lab, const SearchOptions& s, const data::Dataset& split) {
  search::QuantizedEvaluator e;
  e.fresh_model = [&lab] { return std::static_pointer_cast<nn::Module>(lab.trained_copy()); };
  e.eval = &split;
  e.batch_size = std::max<std::int64_t>(lab.options().batch_size, 1024);
  e.example = Tensor::zeros({1, models::kJscFeatures});  // BitOPs per sample
  e.finetune_epochs = s.finetune_epochs;
  e.train = &lab.data().train;
  e.finetune.model = lab.options().model;
  e.finetune.dataset = lab.options().dataset;
  e.finetune.batch_size = lab.options().batch_size;
  e.finetune.learning_rate = lab.options().finetune_learning_rate;
  e.finetune.seed = nn::detail::derive_seed(lab.options().seed, 1);
  e.finetune.progress = false;
  return e;
}

/// Runs one curve: a study `<program>-<name>` maximizing validation accuracy over `space`
/// with `sampler`; appends every trial to `trials_csv`; re-measures the best on test.
inline Curve run_curve(const Lab& lab, const SearchOptions& s, const std::string& program, const std::string& name,
                       const search::MixedPrecisionSpace& space, const std::string& sampler, std::string& trials_csv) {
  Curve c;
  c.name = name;
  c.sampler = sampler;
  auto storage = search::open_storage(s.storage);
  const std::string study_name = program + "-" + name;
  qnum::detail::require(!storage->find_study(study_name), "study '", study_name, "' already exists in ", storage->url(),
                        "; use another --storage");
  search::Study study(storage, study_name, {search::StudyDirection::maximize},
                      make_sampler(sampler, space, s.search_seed), nullptr, search::OpenMode::create);
  const auto val = lab_evaluator(lab, s, lab.data().val);
  study.optimize(
      [&](search::Trial& t) {
        const auto cfg = space.sample(t);
        const auto run = lab.dir() / "trials" / (name + "-" + std::to_string(t.number()));
        const auto r = val(cfg, run);
        t.set_user_attr("metrics", r.to_json());
        return r.accuracy;
      },
      s.trials);
  for (const auto& [n, b] : study.best_so_far()) c.best.push_back(b);
  for (const auto& t : study.get_trials()) {
    const bool ok = t.state == search::TrialState::complete;
    c.accuracy.push_back(ok ? t.values[0] : std::nan(""));
    std::string params;
    for (const auto& [k, v] : t.params)
      params += (params.empty() ? "" : " ") + k + "=" + param_text(search::to_external(t.distributions.at(k), v));
    const auto& m = t.user_attrs.contains("metrics") ? t.user_attrs["metrics"] : nlohmann::json::object();
    trials_csv += name + "," + sampler + "," + std::to_string(t.number) + "," +
                  (ok ? Lab::fmt(t.values[0], 6) : std::string("")) + "," +
                  (m.contains("bits") ? Lab::fmt(m["bits"].get<double>(), 0) : "") + "," +
                  (m.contains("bitops") ? Lab::fmt(m["bitops"].get<double>(), 0) : "") + "," +
                  std::string(search::to_string(t.state)) + ",\"" + params + "\"\n";
  }
  const auto best = study.best_trial();
  c.best_number = best.number;
  std::map<std::string, search::ParamValue> point;
  for (const auto& [k, v] : best.params) {
    point[k] = search::to_external(best.distributions.at(k), v);
    c.best_params += (c.best_params.empty() ? "" : " ") + k + "=" + param_text(point[k]);
  }
  c.best_val = val(space.config(point), lab.dir() / "trials" / (name + "-best-val"));
  c.best_test = lab_evaluator(lab, s, lab.data().test)(space.config(point), lab.dir() / "trials" / (name + "-best"));
  lab.note(name + " (" + sampler + "): best validation accuracy " + Lab::fmt(c.best_val.accuracy) + " at trial " +
           std::to_string(c.best_number) + ", test " + Lab::fmt(c.best_test.accuracy) + ", " +
           Lab::fmt(c.best_test.average_bitwidth(), 2) + " bits/parameter");
  return c;
}

inline const char* trials_csv_header() { return "curve,sampler,trial,accuracy,bits,bitops,state,params\n"; }

/// results.csv: trial, then each curve's best-so-far validation accuracy.
inline std::string best_so_far_csv(const std::vector<Curve>& curves) {
  std::string csv = "trial";
  std::size_t n = 0;
  for (const auto& c : curves) csv += "," + c.name, n = std::max(n, c.best.size());
  csv += "\n";
  for (std::size_t i = 0; i < n; ++i) {
    csv += std::to_string(i);
    for (const auto& c : curves)
      csv += "," + (i < c.best.size() && !std::isnan(c.best[i]) ? Lab::fmt(c.best[i], 6) : std::string(""));
    csv += "\n";
  }
  return csv;
}

/// The gnuplot script: one best-so-far line per curve (columns 2..), the fp32 accuracy dashed.
inline std::string best_so_far_plot(const Lab& lab, const std::string& comment, const std::string& title,
                                    std::size_t curves) {
  return best_so_far_script(comment, title, curves, lab.fp32_accuracy(),
                            "fp32 (test) " + Lab::fmt(lab.fp32_accuracy()));
}

/// The table printed on stdout.
inline void print_curves(const std::vector<Curve>& curves) {
  std::printf("%-18s %-7s %6s %10s %10s %9s %12s\n", "curve", "sampler", "best#", "val_acc", "test_acc", "bits/par",
              "BitOPs/sample");
  for (const auto& c : curves)
    std::printf("%-18s %-7s %6lld %10.4f %10.4f %9.2f %12.0f\n", c.name.c_str(), c.sampler.c_str(),
                static_cast<long long>(c.best_number), c.best_val.accuracy, c.best_test.accuracy,
                c.best_test.average_bitwidth(), c.best_test.bitops);
}

}  // namespace qnum::labs
