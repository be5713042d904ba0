// lab1-prune: MASE lab 1's pruning sweep.
//
// Trains the fp32 model once; then for each method (random, l1-norm) and sparsity s (default
// 0.1 ... 0.9) prunes the weights of every Linear layer of a copy of the trained model —
// exactly round(s·n) entries per layer (--scope local, the default) or over all layers
// together (--scope global) — fine-tunes it --finetune-epochs with the masks kept, and
// evaluates it on the test split. --activations also prunes every Linear's input at the same
// sparsity and method (per sample; see include/qnum/passes/prune.hpp). Writes
// <dir>/results.csv (sparsity,method,accuracy; rows grouped by method), <dir>/plot.gp and,
// with gnuplot, <dir>/plot.png; prints the table on stdout. Runs: <dir>/fp32,
// <dir>/prune-<method>-<sparsity>. JSC models train with the Trainer on jsc-synthetic/jsc; BERT
// models (--model bert-tiny) with the Trainer on text-synthetic/imdb (lab_text.hpp). --load CKPT
// starts from a checkpoint (e.g. lab1-ptq-qat's best QAT model) instead of training; the most
// accurate pruned model is saved as <dir>/best.safetensors.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "labs.hpp"
#include "lab_text.hpp"
#include "qnum/passes/prune.hpp"

namespace qnum::labs::lab1_prune {

using qnum::labs::LabBase;
namespace passes = qnum::passes;

/// The sparsity as written in the CSV and run names: shortest round-trip decimal ("0.5").
std::string sparsity_text(double s) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*f", digits, s);
    if (std::strtod(buf, nullptr) == s) break;
  }
  return buf;
}

std::string plot_script(const LabBase& lab, const std::vector<std::string>& methods, const std::string& what,
                        int finetune_epochs) {
  const auto& o = lab.options();
  std::string plot = "plot ";
  int pt = 7;
  for (const auto& m : methods) {
    plot += "\"results.csv\" skip 1 using 1:(strcol(2) eq \"" + m + "\" ? $3 : NaN) with linespoints pt " +
            std::to_string(pt) + " title \"" + m + "\", \\\n     ";
    pt = pt == 7 ? 5 : pt + 2;
  }
  plot += "fp32 with lines dt 2 lc rgb \"gray40\" title sprintf(\"fp32 %.4f (unpruned)\", fp32)\n";
  return qnum::labs::gnuplot_preamble("lab1-prune: test accuracy vs sparsity per method (results.csv)") +
         "set title \"" + o.model + " on " + o.dataset + ": " + what + ", fine-tuned " +
         std::to_string(finetune_epochs) + (finetune_epochs == 1 ? " epoch" : " epochs") +
         "\"\n"
         "set xlabel \"sparsity\"\n"
         "set ylabel \"test accuracy\"\n"
         "set xrange [0:1]\n"
         "set xtics 0.1\n"
         "fp32 = " +
         LabBase::fmt(lab.fp32_accuracy(), 6) + "\n" + plot;
}


int run(int argc, char** argv) {
  CLI::App app{"MASE lab 1: accuracy after pruning and fine-tuning, random vs l1-norm, over sparsities", "lab1-prune"};
  qnum::labs::CommonOptions common;
  std::vector<double> sparsities{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
  std::vector<std::string> methods{"random", "l1-norm"};
  std::string scope = "local";
  int finetune_epochs = 2;
  bool activations = false;
  qnum::labs::TextOptions text;
  qnum::labs::add_common_options(app, common);
  qnum::labs::add_text_options(app, text);
  app.add_option("--sparsities", sparsities, "weight sparsities in [0, 1), comma separated")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--methods", methods, "pruning methods, comma separated: random, l1-norm")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--scope", scope, "local (each layer at the sparsity) or global (all layers ranked together)")
      ->capture_default_str();
  app.add_option("--finetune-epochs", finetune_epochs, "fine-tuning epochs after pruning (0: none; BERT: default 1)")
      ->capture_default_str();
  app.add_flag("--activations", activations, "also prune every Linear's input, same sparsity and method");
  std::string load;
  app.add_option("--load", load,
                 "start from this checkpoint (e.g. lab1-ptq-qat's best QAT model; its quantized layers are kept) "
                 "instead of training --epochs");

  return qnum::labs::run_main(app, argc, argv, [&] {
    using qnum::detail::require;
    sparsities = qnum::labs::sorted_unique(sparsities, "--sparsities");
    for (double s : sparsities) require(s >= 0.0 && s < 1.0, "--sparsities: ", s, " must be in [0, 1)");
    require(!methods.empty(), "--methods needs at least one of random, l1-norm");
    for (std::size_t i = 0; i < methods.size(); ++i) {
      require(methods[i] == "random" || methods[i] == "l1-norm", "--methods: unknown method '", methods[i],
              "' (allowed: random, l1-norm)");
      for (std::size_t j = 0; j < i; ++j)
        require(methods[i] != methods[j], "--methods: ", methods[i], " appears twice");
    }
    require(scope == "local" || scope == "global", "--scope: unknown scope '", scope, "' (allowed: local, global)");
    if (qnum::labs::is_text_lab(common) && app.count("--finetune-epochs") == 0) finetune_epochs = 1;  // BERT
    require(finetune_epochs >= 0, "--finetune-epochs must be >= 0, got ", finetune_epochs);
    qnum::labs::with_lab("lab1-prune", app, common, text, [&](auto& lab) {
      const double fp32 = load.empty() ? lab.train_fp32() : lab.load_start(load);
      decltype(lab.trained_copy()) best_model;  // the most accurate pruned model (ties: the sparser)
      double best_accuracy = -1;
      // Global l1-norm activation pruning fixes its threshold on calibration batches: the
      // first 8 training batches in dataset order.
      std::string csv = "sparsity,method,accuracy\n";
      struct Row {
        double sparsity;
        std::string method;
        double accuracy, achieved;
      };
      std::vector<Row> rows;
      for (const auto& method : methods)
        for (double s : sparsities) {
          nlohmann::json side{{"sparsity", s}, {"method", method}, {"scope", scope}};
          nlohmann::json cfg{{"weight", side}, {"seed", lab.options().seed}};
          if (activations) cfg["activation"] = side;
          auto model = lab.trained_copy();
          const auto report = passes::prune(*model, passes::parse_prune_config(cfg), [&] { lab.calibrate(*model, 8); });
          lab.finetune(model, "prune-" + method + "-" + sparsity_text(s), finetune_epochs);
          const double acc = lab.test_accuracy(model);
          lab.note(method + " sparsity " + sparsity_text(s) +
                   " (weights pruned: " + LabBase::fmt(report.weight_sparsity()) + "): accuracy " + LabBase::fmt(acc));
          csv += sparsity_text(s) + "," + method + "," + LabBase::fmt(acc, 6) + "\n";
          rows.push_back({s, method, acc, report.weight_sparsity()});
          if (acc >= best_accuracy) {
            best_model = model;
            best_accuracy = acc;
          }
        }
      const auto best_file = lab.save_model(*best_model, "best");

      const std::string what = scope + " weight pruning" + (activations ? " + activations" : "") + " of every Linear";
      const auto plot =
          qnum::labs::write_results(lab.dir(), csv, plot_script(lab, methods, what, finetune_epochs), "lab1-prune");

      const auto& o = lab.options();
      std::printf("lab1-prune  %s on %s, %d epoch%s fp32 (test accuracy %.4f), fine-tune %d epoch%s, seed %llu\n",
                  o.model.c_str(), o.dataset.c_str(), o.epochs, o.epochs == 1 ? "" : "s", fp32, finetune_epochs,
                  finetune_epochs == 1 ? "" : "s", static_cast<unsigned long long>(o.seed));
      std::printf("%s\n\n", what.c_str());
      std::printf("%8s  %-8s  %8s  %16s\n", "sparsity", "method", "accuracy", "weights pruned");
      for (const auto& r : rows)
        std::printf("%8s  %-8s  %8.4f  %16.4f\n", sparsity_text(r.sparsity).c_str(), r.method.c_str(), r.accuracy,
                    r.achieved);
      std::printf("\nbest     %s (test accuracy %.4f)\n", best_file.string().c_str(), best_accuracy);
      std::printf("results  %s\n", (lab.dir() / "results.csv").string().c_str());
      std::printf("plot     %s\n", plot == qnum::labs::PlotResult::written ? (lab.dir() / "plot.png").string().c_str()
                                                                           : "(not drawn: gnuplot missing)");
    });
  });
}

}  // namespace qnum::labs::lab1_prune
