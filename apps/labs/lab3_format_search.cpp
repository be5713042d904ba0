// lab3-format-search: MASE lab 3 task 2, a search over number formats per layer, on any
// registered model (JSC on jsc-synthetic/jsc; BERT, e.g. --model bert-tiny, on
// text-synthetic/imdb).
//
// Trains the fp32 model once (or starts from --load CKPT, its quantized layers and masks
// restored); then one study (--sampler, default TPE) per format family in --families (default
// the lab's list, qnum::search::lab3_families(): integer, minifloat_denorm, minifloat_ieee,
// log, block_fp, block_minifloat, block_log, binary, binary_scaling, residual_sign; any family
// of qnum::search::variant_families() may be named, e.g. mxint, mxfp, ternary), where each
// Linear (or those --layers selects) chooses among that family's variants (e.g.
// integer:w8f4/w6f3/w4f2) — parameter "<layer>/format" — plus a "mixed" study whose layers
// choose among all of them (each layer's family searched too). Objective: validation accuracy
// of a fresh quantized copy of the starting model; the best of each study is re-measured on
// test. Writes <dir>/results.csv (trial, best-so-far accuracy per curve), <dir>/trials.csv,
// <dir>/plot.gp and, with gnuplot, <dir>/plot.png, and the best model of all curves as
// <dir>/best.safetensors; prints the table on stdout.
#include <cstdio>
#include <string>
#include <vector>

#include "labs.hpp"
#include "lab3_common.hpp"

namespace qnum::labs::lab3_format_search {

int run(int argc, char** argv) {
  CLI::App app{"MASE lab 3 task 2: per-layer format search, one curve per format family plus mixed",
               "lab3-format-search"};
  qnum::labs::CommonOptions common;
  qnum::labs::TextOptions text;
  qnum::labs::SearchOptions search;
  std::vector<std::string> families = qnum::search::lab3_families();
  std::string sampler = "tpe";
  bool mixed = true;
  qnum::labs::add_common_options(app, common);
  qnum::labs::add_text_options(app, text);
  qnum::labs::add_search_options(app, search);
  app.add_option("--families", families, "format families, one curve each")->delimiter(',')->capture_default_str();
  app.add_option("--sampler", sampler, "tpe, random or grid")->capture_default_str();
  app.add_flag("!--no-mixed", mixed, "no \"mixed\" curve (every family's variants in one space)");

  return qnum::labs::run_main(app, argc, argv, [&] {
    qnum::labs::validate(search, common.model);
    qnum::detail::require(!families.empty(), "--families needs at least one value");
    for (std::size_t i = 0; i < families.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        qnum::detail::require(families[i] != families[j], "--families: ", families[i], " appears twice");
    qnum::detail::require(sampler == "tpe" || sampler == "random" || sampler == "grid", "--sampler: unknown sampler '",
                          sampler, "' (allowed: tpe, random, grid)");
    // The spaces are checked on a fresh model before any data is read or training done.
    auto probe = qnum::pipeline::make_classifier(common.model).module;
    std::vector<std::tuple<std::string, qnum::search::MixedPrecisionSpace, std::string>> spaces;
    for (const auto& f : families)
      spaces.emplace_back(f, qnum::search::MixedPrecisionSpace::families(*probe, search.layers, {"linear"}, {f}),
                          sampler);
    if (mixed && families.size() > 1)
      spaces.emplace_back(
          "mixed", qnum::search::MixedPrecisionSpace::families(*probe, search.layers, {"linear"}, families), sampler);
    qnum::labs::with_lab("lab3-format-search", app, common, text, [&](auto& lab) {
      const double start = search.load.empty() ? lab.train_fp32() : lab.load_start(search.load);
      const auto [curves, best_file] = qnum::labs::run_curves(lab, search, "lab3-format-search", spaces);
      const auto& o = lab.options();
      const auto plot = qnum::labs::write_results(
          lab.dir(), qnum::labs::best_so_far_csv(curves, [](const qnum::labs::Curve& c) { return c.name; }),
          qnum::labs::best_so_far_plot(lab, search, "lab3-format-search: best validation accuracy so far (results.csv)",
                                       o.model + " on " + o.dataset + ": per-layer format search (" + sampler + ")",
                                       curves.size()),
          "lab3-format-search");

      std::printf(
          "lab3-format-search  %s on %s, %s (test accuracy %.4f), %s, %d trials per curve, %zu layers, seed "
          "%llu\n\n",
          o.model.c_str(), o.dataset.c_str(), qnum::labs::start_text(o, search).c_str(), start, sampler.c_str(),
          search.trials, std::get<1>(spaces.front()).layers().size(), static_cast<unsigned long long>(o.seed));
      qnum::labs::print_curves(curves);
      qnum::labs::print_outputs(lab, curves, best_file, plot);
    });
  });
}

}  // namespace qnum::labs::lab3_format_search
