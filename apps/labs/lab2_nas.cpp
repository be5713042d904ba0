// lab2-nas: MASE lab 2's NAS-BERT search (tutorial 5), one best-so-far curve per sampler.
//
// Per sampler (--samplers, default grid,random,tpe) a study of --trials trials over the
// NAS-BERT space (include/qnum/search/nas_bert.hpp): num_hidden_layers, num_attention_heads,
// hidden_size and intermediate_size as indices into --layers, --heads, --hidden-sizes,
// --intermediate-sizes (MASE's lists by default), and for every square Linear of the model
// a choice "<module path>_type" in {linear, identity}. Every choice takes effect (MASE's
// tutorial changed only the hidden and intermediate sizes); a hidden size the head count
// does not divide ends the trial PRUNED with the reason. Each trial builds a fresh randomly
// initialised BERT (--seed), trains it --epochs with the model's recipe from the registry
// (pipeline::default_recipe: AdamW at 1e-3, 6% warm-up, weight decay 0.01, clipping 1.0; any
// option given wins) and returns its validation accuracy; each curve's best model is
// measured on the test split. The best trial over all curves is saved, trained, as
// <dir>/best.safetensors (+ .json, config.json beside it: the architecture, the identity
// Linears in its structure, the tokenizer's fingerprint and the recipe), which `qnum test`
// and lab2-compression --load rebuild.
// grid visits points of the full product in a seeded random order without listing it
// (ShuffledGridSampler), so N grid trials are a fair curve.
// Writes <dir>/results.csv (trial, best-so-far accuracy per sampler), <dir>/trials.csv,
// <dir>/plot.gp and, with gnuplot, <dir>/plot.png, <dir>/best.safetensors; prints the table
// on stdout.
#include <string>
#include <vector>

#include "labs.hpp"
#include "lab2_common.hpp"

namespace qnum::labs::lab2_nas {

int run(int argc, char** argv) {
  CLI::App app{"MASE lab 2: NAS-BERT search on a text dataset, best accuracy so far vs trials per sampler", "lab2-nas"};
  qnum::labs::CommonOptions common;
  qnum::labs::TextOptions text;
  qnum::labs::Lab2Options o;
  o.samplers = {"grid", "random", "tpe"};
  qnum::labs::add_lab2_options(app, common, text, o);
  app.remove_option(app.get_option("--finetune-learning-rate"));  // nothing is fine-tuned here

  return qnum::labs::run_main(app, argc, argv, [&] {
    qnum::labs::Lab2 lab("lab2-nas", app, common, text, o, qnum::labs::sorted_unique(o.samplers, "--samplers"));
    std::string trials_csv = qnum::labs::lab2_trials_csv_header();
    std::vector<qnum::labs::Lab2Curve> curves;
    for (const auto& s : lab.options().samplers)
      curves.push_back(qnum::labs::run_lab2_curve(lab, qnum::labs::Variant{s, s, std::nullopt, 0}, trials_csv));
    qnum::labs::finish_lab2(lab, curves, trials_csv,
                            "NAS-BERT on " + lab.lab().options().dataset + ": grid vs random vs TPE");
  });
}

}  // namespace qnum::labs::lab2_nas
