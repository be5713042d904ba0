// The `qnum` command line: list and describe formats, quantize .npy tensors, show the
// quantization error of several formats on a generated tensor, benchmark kernels, and train,
// test and predict with any registered model (train_command.hpp, test_command.hpp,
// predict_command.hpp; the pipeline: qnum/pipeline/), write models for other tools
// (export_command.hpp), and run MASE's labs (apps/labs/labs.hpp).
//
// Errors in user input (specs, files, options) print one line `qnum: error: ...` and exit 2.
#include <CLI/CLI.hpp>

#include <iostream>

#include <qnum/qnum.hpp>
#if QNUM_WITH_CUDA
#include <qnum/cuda/backend.hpp>  // registers the CUDA backend: --device cuda
#endif

#include "bench_command.hpp"
#include "qnum/pipeline/user_models.hpp"
#include "labs/labs.hpp"
#include "download_command.hpp"
#include "export_command.hpp"
#include "format_commands.hpp"
#include "mase_flags.hpp"
#include "predict_command.hpp"
#include "search_command.hpp"
#include "study_command.hpp"
#include "test_command.hpp"
#include "train_command.hpp"
#include "transform_command.hpp"

namespace {

constexpr int kUsageError = 2;

/// Runs the one subcommand that was parsed.
template <class... Commands>
void run_parsed(const Commands&... commands) {
  (void)((commands.parsed() ? (commands.run(), true) : false) || ...);
}

}  // namespace

int main(int argc, char** argv) {
  // The labs (apps/labs/labs.hpp) parse their own options: `qnum lab <lab> ...` or a lab's link.
  if (const auto status = qnum::labs::run_if_lab(argc, argv)) return *status;

  CLI::App app{"qnum: custom number formats for deep learning"};
  app.require_subcommand(1);
  app.add_subcommand("lab", "run one of MASE's labs: qnum lab <lab> [options] (qnum lab --help lists them)");
  // Each command registers its options on construction; CLI11 keeps pointers to them.
  const qnum::cli::FormatsCommand formats(app);
  const qnum::cli::QuantizeCommand quantize(app);
  const qnum::cli::DemoCommand demo(app);
  const qnum::cli::BenchCommand bench(app);
  const qnum::cli::DownloadCommand download(app);
  const qnum::cli::TrainCommand train(app);
  const qnum::cli::TestCommand test(app);
  const qnum::cli::PredictCommand predict(app);
  const qnum::cli::TransformCommand transform(app);
  const qnum::cli::ExportCommand export_(app);
  const qnum::cli::ReportCommand report(app);
  const qnum::cli::SearchCommand search(app);
  const qnum::cli::StudyCommand study(app);
  // MASE's `ch` spellings on the four commands ch has (cli/mase_flags.hpp).
  const qnum::cli::MaseFlags mase_train(app, "train", qnum::mase::Command::train);
  const qnum::cli::MaseFlags mase_test(app, "test", qnum::mase::Command::test);
  const qnum::cli::MaseFlags mase_transform(app, "transform", qnum::mase::Command::transform);
  const qnum::cli::MaseFlags mase_search(app, "search", qnum::mase::Command::search);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 quotes arguments as they are: escaped like a qnum::Error, so still one line.
    std::cerr << "qnum: error: " << qnum::detail::one_line(e.what()) << "\n";
    return kUsageError;
  }

  try {
    qnum::pipeline::register_models_from_env();  // the user's own model names ($QNUM_MODELS)
    for (const auto* m : {&mase_train, &mase_test, &mase_transform, &mase_search}) m->explain();
    run_parsed(formats, quantize, demo, bench, download, train, test, predict, transform, export_, report, search,
               study);
  } catch (const qnum::Error& e) {
    std::cerr << "qnum: error: " << e.what() << "\n";
    return kUsageError;
  } catch (const std::exception& e) {
    std::cerr << "qnum: error: " << qnum::detail::one_line(e.what()) << "\n";
    return 1;
  }
  return 0;
}
