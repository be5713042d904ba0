// lab3-format-search: MASE lab 3 task 2, a search over number formats per layer.
//
// Trains the fp32 model once; then one TPE study (--sampler) per format family in
// --families (default every family of qnum::search::format_variants(): integer,
// minifloat_denorm, minifloat_ieee, log, block_fp, block_minifloat, block_log, mxint, mxfp,
// scale_integer, binary, ternary), where each Linear (or those --layers selects) chooses among
// that family's variants (e.g. integer:w8f4/w6f3/w4f2) — parameter "<layer>/format" — plus a
// "mixed" study whose layers choose among all of them. Objective: validation accuracy of a
// fresh quantized copy of the trained model; the best of each study is re-measured on test.
// Writes <dir>/results.csv (trial, best-so-far accuracy per curve), <dir>/trials.csv,
// <dir>/plot.gp and, with gnuplot, <dir>/plot.png; prints the table on stdout.
#include <cstdio>
#include <string>
#include <vector>

#include "lab3_common.hpp"

int main(int argc, char** argv) {
  CLI::App app{"MASE lab 3 task 2: per-layer format search, one curve per format family plus mixed",
               "lab3-format-search"};
  qnum::labs::CommonOptions common;
  qnum::labs::SearchOptions search;
  std::vector<std::string> families = qnum::search::variant_families();
  std::string sampler = "tpe";
  bool mixed = true;
  qnum::labs::add_common_options(app, common);
  qnum::labs::add_search_options(app, search);
  app.add_option("--families", families, "format families, one curve each")->delimiter(',')->capture_default_str();
  app.add_option("--sampler", sampler, "tpe, random or grid")->capture_default_str();
  app.add_flag("!--no-mixed", mixed, "no \"mixed\" curve (every family's variants in one space)");

  return qnum::labs::run_main(app, argc, argv, [&] {
    using qnum::labs::Lab;
    qnum::labs::validate(search);
    qnum::detail::require(!families.empty(), "--families needs at least one value");
    for (std::size_t i = 0; i < families.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        qnum::detail::require(families[i] != families[j], "--families: ", families[i], " appears twice");
    qnum::detail::require(sampler == "tpe" || sampler == "random" || sampler == "grid", "--sampler: unknown sampler '",
                          sampler, "' (allowed: tpe, random, grid)");
    auto probe = qnum::models::make_jsc_model(common.model, common.seed);
    std::vector<std::pair<std::string, qnum::search::MixedPrecisionSpace>> spaces;
    for (const auto& f : families)
      spaces.emplace_back(f, qnum::search::MixedPrecisionSpace::families(*probe, search.layers, {"linear"}, {f}));
    if (mixed && families.size() > 1)
      spaces.emplace_back("mixed",
                          qnum::search::MixedPrecisionSpace::families(*probe, search.layers, {"linear"}, families));
    Lab lab("lab3-format-search", common);
    const double fp32 = lab.train_fp32();

    std::string trials_csv = qnum::labs::trials_csv_header();
    std::vector<qnum::labs::Curve> curves;
    for (const auto& [name, space] : spaces)
      curves.push_back(qnum::labs::run_curve(lab, search, "lab3-format-search", name, space, sampler, trials_csv));
    qnum::write_file_atomic(lab.dir() / "trials.csv", trials_csv);
    const auto& o = lab.options();
    const auto plot = qnum::labs::write_results(
        lab.dir(), qnum::labs::best_so_far_csv(curves),
        qnum::labs::best_so_far_plot(lab, "lab3-format-search: best validation accuracy so far (results.csv)",
                                     o.model + " on " + o.dataset + ": per-layer format search (" + sampler + ")",
                                     curves.size()),
        "lab3-format-search");

    std::printf(
        "lab3-format-search  %s on %s, %d epochs fp32 (test accuracy %.4f), %s, %d trials per curve, %zu "
        "layers, seed %llu\n\n",
        o.model.c_str(), o.dataset.c_str(), o.epochs, fp32, sampler.c_str(), search.trials,
        spaces.front().second.layers().size(), static_cast<unsigned long long>(o.seed));
    qnum::labs::print_curves(curves);
    for (const auto& c : curves) std::printf("best %s: %s\n", c.name.c_str(), c.best_params.c_str());
    std::printf("\nresults  %s\ntrials   %s\n", (lab.dir() / "results.csv").string().c_str(),
                (lab.dir() / "trials.csv").string().c_str());
    std::printf("plot     %s\n", plot == qnum::labs::PlotResult::written ? (lab.dir() / "plot.png").string().c_str()
                                                                         : "(not drawn: gnuplot missing)");
  });
}
