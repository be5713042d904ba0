// lab3-mixed-precision: MASE lab 3 task 1, per-layer mixed precision.
//
// Trains the fp32 model once; then, per sampler (--samplers, default tpe; e.g. tpe,random to
// compare), a study of --trials trials where every Linear (or those --layers selects) gets
// MASE's integer format on its input, weight and bias with its own width in --widths
// (default 8,16,32) and frac width in --frac-widths (default 2,4,8) — parameters
// "<layer>/width" and "<layer>/frac_width". Each trial quantizes a fresh copy of the trained
// model (fine-tuned --finetune-epochs when > 0) and returns its validation accuracy; the
// best trial of each study is re-measured on the test split.
// Writes <dir>/results.csv (trial, best-so-far accuracy per sampler), <dir>/trials.csv,
// <dir>/plot.gp and, with gnuplot, <dir>/plot.png; prints the table on stdout.
#include <cstdio>
#include <string>
#include <vector>

#include "lab3_common.hpp"

int main(int argc, char** argv) {
  CLI::App app{"MASE lab 3 task 1: search per-layer integer width/frac width, best accuracy so far vs trials",
               "lab3-mixed-precision"};
  qnum::labs::CommonOptions common;
  qnum::labs::SearchOptions search;
  std::vector<std::string> samplers{"tpe"};
  std::vector<std::int64_t> widths{8, 16, 32}, fracs{2, 4, 8};
  qnum::labs::add_common_options(app, common);
  qnum::labs::add_search_options(app, search);
  app.add_option("--samplers", samplers, "samplers, one curve each: tpe, random, grid")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--widths", widths, "width choices per layer")->delimiter(',')->capture_default_str();
  app.add_option("--frac-widths", fracs, "frac width choices per layer")->delimiter(',')->capture_default_str();

  return qnum::labs::run_main(app, argc, argv, [&] {
    using qnum::labs::Lab;
    qnum::labs::validate(search);
    samplers = qnum::labs::sorted_unique(samplers, "--samplers");
    for (const auto& s : samplers)
      qnum::detail::require(s == "tpe" || s == "random" || s == "grid", "--samplers: unknown sampler '", s,
                            "' (allowed: tpe, random, grid)");
    widths = qnum::labs::sorted_unique(widths, "--widths");
    fracs = qnum::labs::sorted_unique(fracs, "--frac-widths");
    for (auto w : widths) qnum::detail::require(w >= 2 && w <= 32, "--widths: ", w, " must be in [2, 32]");
    for (auto f : fracs) qnum::detail::require(f >= 0 && f <= 32, "--frac-widths: ", f, " must be in [0, 32]");
    // The space is checked on a fresh model before any training.
    auto probe = qnum::models::make_jsc_model(common.model, common.seed);
    const auto space =
        qnum::search::MixedPrecisionSpace::integer_widths(*probe, search.layers, {"linear"}, widths, fracs);
    Lab lab("lab3-mixed-precision", common);
    const double fp32 = lab.train_fp32();

    std::string trials_csv = qnum::labs::trials_csv_header();
    std::vector<qnum::labs::Curve> curves;
    for (const auto& s : samplers)
      curves.push_back(qnum::labs::run_curve(lab, search, "lab3-mixed-precision", s, space, s, trials_csv));
    qnum::write_file_atomic(lab.dir() / "trials.csv", trials_csv);
    const auto& o = lab.options();
    const auto plot = qnum::labs::write_results(
        lab.dir(), qnum::labs::best_so_far_csv(curves),
        qnum::labs::best_so_far_plot(lab, "lab3-mixed-precision: best validation accuracy so far (results.csv)",
                                     o.model + " on " + o.dataset + ": per-layer integer width/frac search",
                                     curves.size()),
        "lab3-mixed-precision");

    std::printf(
        "lab3-mixed-precision  %s on %s, %d epochs fp32 (test accuracy %.4f), %d trials per sampler, %zu "
        "layers, %.0f points, seed %llu\n\n",
        o.model.c_str(), o.dataset.c_str(), o.epochs, fp32, search.trials, space.layers().size(), space.size(),
        static_cast<unsigned long long>(o.seed));
    qnum::labs::print_curves(curves);
    for (const auto& c : curves) std::printf("best %s: %s\n", c.name.c_str(), c.best_params.c_str());
    std::printf("\nresults  %s\ntrials   %s\n", (lab.dir() / "results.csv").string().c_str(),
                (lab.dir() / "trials.csv").string().c_str());
    std::printf("plot     %s\n", plot == qnum::labs::PlotResult::written ? (lab.dir() / "plot.png").string().c_str()
                                                                         : "(not drawn: gnuplot missing)");
  });
}
