// What the Lab 3 programs (lab3-mixed-precision, lab3-format-search) share: one study per
// curve over a mixed-precision space on the trained fp32 model (accuracy on the validation
// split, a fresh quantized copy per trial), the best trial re-measured on the test split,
// and the outputs: results.csv (trial, then one best-so-far column per curve), trials.csv
// (every trial: curve, number, accuracy, bits, BitOPs, parameters), plot.gp/plot.png, and
// the best model of all curves (highest validation accuracy; its quantized structure) as
// <dir>/best.safetensors for `qnum test ... --load <dir>/best` and the next step's --load.
//
// Written once for every lab type (templates over Lab and TextLab, lab_text.hpp): JSC models
// on feature rows, BERT models on tokenized text. BitOPs are per sample: one feature row, or
// one text (the test split's first, as tokenized for the run).
#pragma once

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab_text.hpp"
#include "qnum/pipeline/checkpoint.hpp"
#include "qnum/search/quantized_objective.hpp"
#include "qnum/search/samplers.hpp"
#include "qnum/search/spaces.hpp"
#include "qnum/search/storage_url.hpp"
#include "qnum/search/study.hpp"

namespace qnum::labs {

/// The search options both Lab 3 programs take.
struct SearchOptions {
  int trials = 20;
  std::uint64_t search_seed = 0;
  int finetune_epochs = 0;  ///< > 0: fine-tune every trial's model (QAT) before measuring
  std::string layers = ".*";
  std::string storage = "memory";
  std::string load;    ///< "" = train the fp32 model; else the checkpoint to start from
  bool resume = false;  ///< continue the studies a killed run left in `storage`
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
  app.add_flag("--resume", s.resume,
               "continue the studies of a killed run in --storage (sqlite or postgresql): finished trials are "
               "kept, each curve runs until it has --trials finished ones");
  app.add_option("--load", s.load,
                 "start from this checkpoint (e.g. lab2-compression's or lab1-prune's best; its quantized layers "
                 "and masks restored) instead of training --epochs");
}

/// Checks the search options and that --load holds `model` (before any data is read or
/// folder made: a checkpoint of another model is one line naming both).
inline void validate(const SearchOptions& s, const std::string& model) {
  qnum::detail::require(s.trials >= 1, "--trials must be >= 1, got ", s.trials);
  qnum::detail::require(s.finetune_epochs >= 0, "--finetune-epochs must be >= 0, got ", s.finetune_epochs);
  qnum::detail::require(!s.resume || s.storage != "memory",
                        "--resume continues studies kept in a database: give --storage sqlite:///FILE.db (or postgresql://)");
  if (!s.load.empty()) pipeline::require_checkpoint_of(model, s.load, train::read_checkpoint_meta(s.load));
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
  search::SamplerOptions so;
  so.seed = seed;
  so.grid = space.grid();
  return search::make_sampler(name, so);
}

inline const char* trials_csv_header() { return "curve,sampler,trial,accuracy,bits,bitops,state,params\n"; }

/// One sample of the lab's data for BitOPs per sample: a feature row, or the test split's
/// first text (token ids [1, tokens]).
template <class L>
Tensor bitops_example(const L& lab) {
  if constexpr (std::is_same_v<L, TextLab>) {
    const auto& test = lab.data().test;
    const std::int64_t len = test.size() > 0 ? test.length(0) : lab.text_options().max_length;
    return pipeline::trace_example(pipeline::Classifier{nullptr, nullptr, pipeline::InputKind::tokens, nullptr}, 1,
                                      std::max<std::int64_t>(len, 1), &test);
  } else {
    return Tensor::zeros({1, models::kJscFeatures});
  }
}

/// The evaluator of `lab`'s starting model on `split` (fine-tuning as the options say, with
/// the recipe of the lab's own fine-tuning).
template <class L, class Data>
search::BasicQuantizedEvaluator<Data> lab_evaluator(const L& lab, const SearchOptions& s, const Data& split) {
  search::BasicQuantizedEvaluator<Data> e;
  e.fresh_model = [&lab] { return std::static_pointer_cast<nn::Module>(lab.trained_copy()); };
  if constexpr (std::is_same_v<L, TextLab>)
    e.forward_of = [](const std::shared_ptr<nn::Module>& m) {
      return models::bert_forward(std::static_pointer_cast<TextLab::Model>(m));
    };
  e.eval = &split;
  e.batch_size = lab.eval_batch_size();
  e.example = bitops_example(lab);
  e.finetune_epochs = s.finetune_epochs;
  e.train = &lab.data().train;
  e.finetune = lab.finetune_config("", s.finetune_epochs);
  e.finetune.progress = false;
  return e;
}

/// On resuming a study: its RUNNING trials were the killed run's (a lab program is its studies'
/// only worker), so they become FAIL; returns the number of finished (complete or pruned) ones.
inline int finish_killed_trials(search::Storage& storage, std::int64_t study_id) {
  int finished = 0;
  for (const auto& t : storage.get_all_trials(study_id)) {
    if (t.state == search::TrialState::running) storage.set_trial_state_values(t.trial_id, search::TrialState::fail);
    finished += t.state == search::TrialState::complete || t.state == search::TrialState::pruned;
  }
  return finished;
}

/// Runs one curve: a study `<program>-<name>` maximizing validation accuracy over `space`
/// with `sampler`; appends every trial to `trials_csv`; re-measures the best on validation
/// (its model kept in `best_model`) and on test.
template <class L>
Curve run_curve(const L& lab, const SearchOptions& s, const std::string& program, const std::string& name,
                const search::MixedPrecisionSpace& space, const std::string& sampler, std::string& trials_csv,
                std::shared_ptr<nn::Module>& best_model) {
  Curve c;
  c.name = name;
  c.sampler = sampler;
  auto storage = search::open_storage(s.storage);
  const std::string study_name = program + "-" + name;
  const auto existing = storage->find_study(study_name);
  qnum::detail::require(s.resume || !existing, "study '", study_name, "' already exists in ", storage->url(),
                        "; pass --resume to continue it, or use another --storage");
  const int done = existing ? finish_killed_trials(*storage, existing->study_id) : 0;
  // Resumed, the sampler's seed moves on so that a random curve does not redraw its first points.
  search::Study study(storage, study_name, {search::StudyDirection::maximize},
                      make_sampler(sampler, space, s.search_seed + static_cast<std::uint64_t>(done)), nullptr,
                      existing ? search::OpenMode::load : search::OpenMode::create);
  if (done > 0) lab.note(name + ": resumed with " + std::to_string(done) + " finished trial(s)");
  const auto val = lab_evaluator(lab, s, lab.data().val);
  if (s.trials > done)
    study.optimize(
        [&](search::Trial& t) {
          const auto cfg = space.sample(t);
          const auto run = lab.dir() / "trials" / (name + "-" + std::to_string(t.number()));
          const auto r = val(cfg, run);
          t.set_user_attr("metrics", r.to_json());
          return r.accuracy;
        },
        s.trials - done);
  for (const auto& [n, b] : study.best_so_far()) c.best.push_back(b);
  for (const auto& t : study.get_trials()) {
    const bool ok = t.state == search::TrialState::complete;
    c.accuracy.push_back(ok ? t.values[0] : std::nan(""));
    std::string params;
    for (const auto& [k, v] : t.params)
      params += (params.empty() ? "" : " ") + k + "=" + param_text(search::to_external(t.distributions.at(k), v));
    const auto& m = t.user_attrs.contains("metrics") ? t.user_attrs["metrics"] : nlohmann::json::object();
    trials_csv += name + "," + sampler + "," + std::to_string(t.number) + "," +
                  (ok ? LabBase::fmt(t.values[0], 6) : std::string("")) + "," +
                  (m.contains("bits") ? LabBase::fmt(m["bits"].get<double>(), 0) : "") + "," +
                  (m.contains("bitops") ? LabBase::fmt(m["bitops"].get<double>(), 0) : "") + "," +
                  std::string(search::to_string(t.state)) + ",\"" + params + "\"\n";
  }
  const auto best = study.best_trial();
  c.best_number = best.number;
  std::map<std::string, search::ParamValue> point;
  for (const auto& [k, v] : best.params) {
    point[k] = search::to_external(best.distributions.at(k), v);
    c.best_params += (c.best_params.empty() ? "" : " ") + k + "=" + param_text(point[k]);
  }
  c.best_val = val(space.config(point), lab.dir() / "trials" / (name + "-best-val"), &best_model);
  c.best_test = lab_evaluator(lab, s, lab.data().test)(space.config(point), lab.dir() / "trials" / (name + "-best"));
  lab.note(name + " (" + sampler + "): best validation accuracy " + LabBase::fmt(c.best_val.accuracy) + " at trial " +
           std::to_string(c.best_number) + ", test " + LabBase::fmt(c.best_test.accuracy) + ", " +
           LabBase::fmt(c.best_test.average_bitwidth(), 2) + " bits/parameter");
  return c;
}

/// Runs every curve of `spaces` (name, space, sampler) on `lab`, saves the best model of
/// all (highest validation accuracy, the first on ties) as <dir>/best.safetensors and
/// writes trials.csv. Returns the curves and the saved file.
template <class L>
std::pair<std::vector<Curve>, std::filesystem::path> run_curves(
    const L& lab, const SearchOptions& s, const std::string& program,
    const std::vector<std::tuple<std::string, search::MixedPrecisionSpace, std::string>>& spaces) {
  std::string trials_csv = trials_csv_header();
  std::vector<Curve> curves;
  std::shared_ptr<nn::Module> best_model;
  double best_accuracy = -1;
  for (const auto& [name, space, sampler] : spaces) {
    std::shared_ptr<nn::Module> model;
    curves.push_back(run_curve(lab, s, program, name, space, sampler, trials_csv, model));
    if (curves.back().best_val.accuracy > best_accuracy) {
      best_accuracy = curves.back().best_val.accuracy;
      best_model = model;
    }
  }
  write_file_atomic(lab.dir() / "trials.csv", trials_csv);
  return {std::move(curves), lab.save_model(*best_model, "best")};
}

/// The gnuplot script: one best-so-far line per curve (columns 2..), the starting model's
/// test accuracy dashed ("fp32", or "loaded" when it came from --load).
inline std::string best_so_far_plot(const LabBase& lab, const SearchOptions& s, const std::string& comment,
                                    const std::string& title, std::size_t curves) {
  return best_so_far_script(comment, title, curves, lab.fp32_accuracy(),
                            (s.load.empty() ? "fp32 (test) " : "loaded (test) ") + LabBase::fmt(lab.fp32_accuracy()));
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

/// How the starting model came to be, for the heading: "10 epochs fp32" or "loaded CKPT".
inline std::string start_text(const CommonOptions& o, const SearchOptions& s) {
  if (!s.load.empty()) return "loaded " + s.load;
  return std::to_string(o.epochs) + (o.epochs == 1 ? " epoch" : " epochs") + " fp32";
}

/// The lines after the table: each curve's best point and where the outputs are.
inline void print_outputs(const LabBase& lab, const std::vector<Curve>& curves, const std::filesystem::path& best_file,
                          PlotResult plot) {
  for (const auto& c : curves) std::printf("best %s: %s\n", c.name.c_str(), c.best_params.c_str());
  std::printf("\nresults  %s\ntrials   %s\n", (lab.dir() / "results.csv").string().c_str(),
              (lab.dir() / "trials.csv").string().c_str());
  std::printf("best     %s (highest validation accuracy of all curves; --load it in the next step or qnum test)\n",
              best_file.string().c_str());
  std::printf("plot     %s\n", plot == PlotResult::written ? (lab.dir() / "plot.png").string().c_str()
                                                            : "(not drawn: gnuplot missing)");
}

}  // namespace qnum::labs
