// lab1-ptq-qat: MASE lab 1's post-training quantization vs quantization-aware training sweep.
//
// Trains the fp32 model once; then for each fixed-point width W (default 4 6 8 12 16 20 24
// 32) quantizes every Linear layer's input, weight and bias to MASE's `integer` format with
// width W and frac_width W/2 (half the bits after the point: MASE's lab choice of 8/4 kept
// at every width, so the range and the resolution shrink together as W falls), and reports
//   PTQ: a copy of the trained model, quantized, evaluated on the test split;
//   QAT: a copy, quantized, fine-tuned --qat-epochs with straight-through gradients, evaluated.
// Writes <dir>/results.csv (width,ptq_accuracy,qat_accuracy), <dir>/plot.gp and, with
// gnuplot, <dir>/plot.png; prints the table on stdout. Runs: <dir>/fp32, <dir>/qat-w<W>.
// --load CKPT starts from a trained checkpoint instead of training; the most accurate QAT
// model is saved as <dir>/best.safetensors for the next step (lab1-prune --load).
// JSC models train with the Trainer on jsc-synthetic/jsc; BERT models (--model bert-tiny)
// with the Trainer on text-synthetic/imdb (lab_text.hpp: its defaults and options).
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "labs.hpp"
#include "lab_text.hpp"
#include "qnum/passes/quantize.hpp"

namespace qnum::labs::lab1_ptq_qat {

using qnum::labs::LabBase;

/// The frac width of the weights and biases at `width`: width/2 by default, a fixed count
/// (clipped to width - 1) when --weight-frac-width N >= 0, width + N when N < 0.
int weight_frac(int width, std::optional<int> option) {
  if (!option) return width / 2;
  return *option >= 0 ? std::min(*option, width - 1) : std::max(width + *option, 0);
}

/// The quantize pass config: integer width/frac on data_in, weight and bias of every Linear.
nlohmann::json fixed_point_on_linears(int width, int frac, int param_frac) {
  nlohmann::json cfg{{"name", "integer"}};
  for (const char* operand : {"data_in", "weight", "bias"}) {
    cfg[std::string(operand) + "_width"] = width;
    cfg[std::string(operand) + "_frac_width"] = std::string(operand) == "data_in" ? frac : param_frac;
  }
  return {{"by", "type"}, {"default", {{"config", {{"name", nullptr}}}}}, {"linear", {{"config", cfg}}}};
}

/// How the frac widths were chosen, for titles and the table.
std::string frac_text(std::optional<int> option) {
  if (!option) return "frac width = width/2";
  if (*option >= 0) return "inputs frac width/2, weights and biases frac " + std::to_string(*option);
  return "inputs frac width/2, weights and biases frac width" + std::to_string(*option);
}

std::string plot_script(const LabBase& lab, const std::vector<int>& widths, int qat_epochs, const std::string& fracs) {
  const auto& o = lab.options();
  std::string xtics;
  for (int w : widths) xtics += (xtics.empty() ? "" : ", ") + std::to_string(w);
  return qnum::labs::gnuplot_preamble("lab1-ptq-qat: test accuracy vs fixed-point width (results.csv)") +
         "set title \"" + o.model + " on " + o.dataset + ": fixed point on every Linear (" + fracs + ")\"\n" +
         "set xlabel \"width (bits)\"\n"
         "set ylabel \"test accuracy\"\n"
         "set xtics (" +
         xtics +
         ")\n"
         "fp32 = " +
         LabBase::fmt(lab.fp32_accuracy(), 6) +
         "\n"
         "plot \"results.csv\" skip 1 using 1:2 with linespoints pt 7 title \"PTQ\", \\\n"
         "     \"\" skip 1 using 1:3 with linespoints pt 5 title \"QAT (" +
         std::to_string(qat_epochs) + (qat_epochs == 1 ? " epoch" : " epochs") +
         ")\", \\\n"
         "     fp32 with lines dt 2 lc rgb \"gray40\" title sprintf(\"fp32 %.4f\", fp32)\n";
}


int run(int argc, char** argv) {
  CLI::App app{"MASE lab 1: PTQ vs QAT accuracy over fixed-point widths on every Linear layer", "lab1-ptq-qat"};
  qnum::labs::CommonOptions common;
  std::vector<int> widths{4, 6, 8, 12, 16, 20, 24, 32};
  int qat_epochs = 2;
  qnum::labs::TextOptions text;
  qnum::labs::add_common_options(app, common);
  qnum::labs::add_text_options(app, text);
  app.add_option("--widths", widths, "fixed-point widths, comma separated (frac width = width/2)")
      ->delimiter(',')
      ->capture_default_str();
  std::optional<int> weight_frac_width;
  app.add_option("--weight-frac-width", weight_frac_width,
                 "frac width of weights and biases: N >= 0 fixed, N < 0 means width + N (default width/2; BERT's "
                 "small weights want e.g. -1)");
  app.add_option("--qat-epochs", qat_epochs, "fine-tuning epochs of each QAT model (BERT: default 1)")
      ->capture_default_str();
  std::string load;
  app.add_option("--load", load, "start from this checkpoint (e.g. qnum train's best) instead of training --epochs");

  return qnum::labs::run_main(app, argc, argv, [&] {
    widths = qnum::labs::sorted_unique(widths, "--widths");
    for (int w : widths) qnum::detail::require(w >= 2 && w <= 32, "--widths: ", w, " must be in [2, 32]");
    if (qnum::labs::is_text_lab(common) && app.count("--qat-epochs") == 0) qat_epochs = 1;  // BERT: 1 epoch
    qnum::detail::require(qat_epochs >= 1, "--qat-epochs must be >= 1, got ", qat_epochs);
    qnum::labs::with_lab("lab1-ptq-qat", app, common, text, [&](auto& lab) {
      const double fp32 = load.empty() ? lab.train_fp32() : lab.load_start(load);

      std::string csv = "width,ptq_accuracy,qat_accuracy\n";
      std::vector<std::pair<double, double>> rows;
      decltype(lab.trained_copy()) best_qat;  // the most accurate QAT model, saved for the next step
      double best_accuracy = -1;
      int best_width = 0;
      for (int w : widths) {
        const auto cfg = fixed_point_on_linears(w, w / 2, weight_frac(w, weight_frac_width));
        auto ptq = lab.trained_copy();
        qnum::passes::quantize(*ptq, cfg);
        const double acc_ptq = lab.test_accuracy(ptq);
        auto qat = lab.trained_copy();
        qnum::passes::quantize(*qat, cfg);
        lab.finetune(qat, "qat-w" + std::to_string(w), qat_epochs);
        const double acc_qat = lab.test_accuracy(qat);
        lab.note("width " + std::to_string(w) + ": PTQ " + LabBase::fmt(acc_ptq) + ", QAT " + LabBase::fmt(acc_qat));
        csv += std::to_string(w) + "," + LabBase::fmt(acc_ptq, 6) + "," + LabBase::fmt(acc_qat, 6) + "\n";
        rows.emplace_back(acc_ptq, acc_qat);
        if (acc_qat > best_accuracy) {
          best_qat = qat;
          best_accuracy = acc_qat;
          best_width = w;
        }
      }
      const auto best_file = lab.save_model(*best_qat, "best");

      const auto plot = qnum::labs::write_results(
          lab.dir(), csv, plot_script(lab, widths, qat_epochs, frac_text(weight_frac_width)), "lab1-ptq-qat");

      const auto& o = lab.options();
      std::printf("lab1-ptq-qat  %s on %s, %d epoch%s fp32 (test accuracy %.4f), QAT %d epoch%s, seed %llu\n",
                  o.model.c_str(), o.dataset.c_str(), o.epochs, o.epochs == 1 ? "" : "s", fp32, qat_epochs,
                  qat_epochs == 1 ? "" : "s", static_cast<unsigned long long>(o.seed));
      std::printf("fixed point (integer) on every Linear's input, weight and bias; %s\n\n",
                  frac_text(weight_frac_width).c_str());
      std::printf("%5s  %12s  %12s\n", "width", "ptq_accuracy", "qat_accuracy");
      for (std::size_t i = 0; i < widths.size(); ++i)
        std::printf("%5d  %12.4f  %12.4f\n", widths[i], rows[i].first, rows[i].second);
      std::printf("\nbest     %s (QAT width %d, test accuracy %.4f; --load it in lab1-prune)\n",
                  best_file.string().c_str(), best_width, best_accuracy);
      std::printf("results  %s\n", (lab.dir() / "results.csv").string().c_str());
      std::printf("plot     %s\n", plot == qnum::labs::PlotResult::written ? (lab.dir() / "plot.png").string().c_str()
                                                                           : "(not drawn: gnuplot missing)");
    });
  });
}

}  // namespace qnum::labs::lab1_ptq_qat
