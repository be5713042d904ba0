// lab3-mixed-precision: MASE lab 3 task 1, per-layer mixed precision, on any registered model
// (JSC on jsc-synthetic/jsc; BERT, e.g. --model bert-tiny, on text-synthetic/imdb).
//
// Trains the fp32 model once (or starts from --load CKPT: e.g. lab2-compression's or
// lab1-prune's best, its quantized layers and masks restored); then, per sampler (--samplers,
// default tpe; e.g. tpe,random to compare), a study of --trials trials where every Linear (or
// those --layers selects) gets MASE's integer format on its input, weight and bias with its
// own width in --widths (default 8,16,32) and frac width in --frac-widths (default 2,4,8) —
// parameters "<layer>/width" and "<layer>/frac_width". Each trial quantizes a fresh copy of
// the starting model (fine-tuned --finetune-epochs when > 0) and returns its validation
// accuracy; the best trial of each study is re-measured on the test split.
// Writes <dir>/results.csv (trial, best-so-far accuracy per sampler), <dir>/trials.csv,
// <dir>/plot.gp and, with gnuplot, <dir>/plot.png, and the best model of all samplers as
// <dir>/best.safetensors; prints the table on stdout.
#include <cstdio>
#include <string>
#include <vector>

#include "labs.hpp"
#include "lab3_common.hpp"

namespace qnum::labs::lab3_mixed_precision {

int run(int argc, char** argv) {
  CLI::App app{"MASE lab 3 task 1: search per-layer integer width/frac width, best accuracy so far vs trials",
               "lab3-mixed-precision"};
  qnum::labs::CommonOptions common;
  qnum::labs::TextOptions text;
  qnum::labs::SearchOptions search;
  std::vector<std::string> samplers{"tpe"};
  std::vector<std::int64_t> widths{8, 16, 32}, fracs{2, 4, 8};
  qnum::labs::add_common_options(app, common);
  qnum::labs::add_text_options(app, text);
  qnum::labs::add_search_options(app, search);
  app.add_option("--samplers", samplers, "samplers, one curve each: tpe, random, grid, nsgaii")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--widths", widths, "width choices per layer")->delimiter(',')->capture_default_str();
  app.add_option("--frac-widths", fracs, "frac width choices per layer")->delimiter(',')->capture_default_str();

  return qnum::labs::run_main(app, argc, argv, [&] {
    qnum::labs::validate(search, common.model);
    samplers = qnum::labs::sorted_unique(samplers, "--samplers");
    for (const auto& s : samplers) qnum::search::require_sampler_name(s, {}, "--samplers");
    widths = qnum::labs::sorted_unique(widths, "--widths");
    fracs = qnum::labs::sorted_unique(fracs, "--frac-widths");
    for (auto w : widths) qnum::detail::require(w >= 2 && w <= 32, "--widths: ", w, " must be in [2, 32]");
    for (auto f : fracs) qnum::detail::require(f >= 0 && f <= 32, "--frac-widths: ", f, " must be in [0, 32]");
    // The space is checked on a fresh model before any data is read or training done.
    auto probe = qnum::pipeline::make_classifier(common.model).module;
    const auto space =
        qnum::search::MixedPrecisionSpace::integer_widths(*probe, search.layers, {"linear"}, widths, fracs);
    qnum::labs::with_lab("lab3-mixed-precision", app, common, text, [&](auto& lab) {
      const double start = search.load.empty() ? lab.train_fp32() : lab.load_start(search.load);
      std::vector<std::tuple<std::string, qnum::search::MixedPrecisionSpace, std::string>> spaces;
      for (const auto& s : samplers) spaces.emplace_back(s, space, s);
      const auto [curves, best_file] = qnum::labs::run_curves(lab, search, "lab3-mixed-precision", spaces);
      const auto& o = lab.options();
      const auto plot = qnum::labs::write_results(
          lab.dir(), qnum::labs::best_so_far_csv(curves, [](const qnum::labs::Curve& c) { return c.name; }),
          qnum::labs::best_so_far_plot(
              lab, search, "lab3-mixed-precision: best validation accuracy so far (results.csv)",
              o.model + " on " + o.dataset + ": per-layer integer width/frac search", curves.size()),
          "lab3-mixed-precision");

      std::printf(
          "lab3-mixed-precision  %s on %s, %s (test accuracy %.4f), %d trials per sampler, %zu layers, %.0f "
          "points, seed %llu\n\n",
          o.model.c_str(), o.dataset.c_str(), qnum::labs::start_text(o, search).c_str(), start, search.trials,
          space.layers().size(), space.size(), static_cast<unsigned long long>(o.seed));
      qnum::labs::print_curves(curves);
      qnum::labs::print_outputs(lab, curves, best_file, plot);
    });
  });
}

}  // namespace qnum::labs::lab3_mixed_precision
