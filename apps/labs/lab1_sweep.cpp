// lab1-sweep: MASE lab 1's first task on a feature-table model (jsc-tiny by default): how
// batch size, training epochs and learning rate change what the model learns, one plot each.
//
// Every run trains a fresh model (same --seed: same initialisation and batch order) with the
// model's default recipe (the registry's: MASE's Adam, cosine per epoch) at --batch-size,
// --epochs and --learning-rate, except the one value its sweep varies:
//   batch-size      --batch-sizes     (default 64 ... 2048)
//   epochs          --epoch-counts    (default 5, 10, 20, 50)
//   learning-rate   --learning-rates  (default 1e-5 ... 1e-1)
// and is measured by its best validation accuracy over the epochs and the test accuracy of its
// best checkpoint (lowest validation loss, as MASE keeps). Writes <dir>/<sweep>/results.csv
// (value, val_accuracy, test_accuracy, final train_loss, seconds), plot.gp and, with gnuplot,
// plot.png; each run's checkpoints in <dir>/<sweep>/<value>/; prints one table per sweep.
// Any registered feature-table model works (jsc-*, a jsc-seq: stack, a $QNUM_MODELS name).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "labs.hpp"
#include "lab_common.hpp"
#include "qnum/pipeline/registry.hpp"
#include "qnum/train/trainer.hpp"

namespace qnum::labs::lab1_sweep {

using qnum::labs::LabBase;

/// One sweep: its name, x-axis label and log base (0: linear), and values as text.
struct Sweep {
  std::string name, axis;
  int log_base = 0;
  std::vector<std::string> values;
};

struct Run {
  double val_accuracy = 0, test_accuracy = 0, train_loss = 0, seconds = 0;
};

/// Trains a fresh `o.model` with `c` (the swept value set) and measures it.
Run train_one(const qnum::labs::CommonOptions& o, const qnum::data::JscSplits& data, qnum::train::TrainConfig c) {
  auto m = qnum::pipeline::make_classifier(o.model, {o.seed});
  qnum::train::Trainer t(m.module, m.forward, c);
  const auto records = t.fit(data.train, data.val);
  Run r;
  for (const auto& e : records) {
    r.val_accuracy = std::max(r.val_accuracy, e.val_accuracy);
    r.seconds += e.seconds;
  }
  r.train_loss = records.empty() ? std::nan("") : records.back().train_loss;
  auto best = qnum::pipeline::make_classifier(o.model, {o.seed});
  qnum::train::load_checkpoint(t.best_checkpoint(), *best.module, nullptr);
  r.test_accuracy = qnum::train::evaluate(*best.module, best.forward, data.test, 1024).accuracy;
  return r;
}

std::string plot_script(const qnum::labs::CommonOptions& o, const Sweep& s) {
  std::string script = qnum::labs::gnuplot_preamble("lab1-sweep: accuracy vs " + s.axis + " (results.csv)") +
                       "set title \"" + o.model + " on " + o.dataset + ": accuracy vs " + s.axis + "\"\n" +
                       "set xlabel \"" + s.axis + "\"\n" + "set ylabel \"accuracy\"\n";
  if (s.log_base > 0) script += "set logscale x " + std::to_string(s.log_base) + "\n";
  return script + "set key inside bottom center box\n" +
         "plot \"results.csv\" skip 1 using 1:2 with linespoints pt 7 title \"best validation accuracy\", \\\n"
         "     \"\" skip 1 using 1:3 with linespoints pt 5 title \"test accuracy (best checkpoint)\"\n";
}

template <class T>
std::vector<std::string> as_text(const std::vector<T>& v) {
  std::vector<std::string> out;
  for (const T& x : v) {
    char buf[32];
    if constexpr (std::is_floating_point_v<T>)
      std::snprintf(buf, sizeof buf, "%g", x);
    else
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(x));
    out.emplace_back(buf);
  }
  return out;
}


int run(int argc, char** argv) {
  CLI::App app{"MASE lab 1: accuracy vs batch size, epochs and learning rate of a feature-table model, one plot each",
               "lab1-sweep"};
  qnum::labs::CommonOptions common;
  common.model = "jsc-tiny";
  std::vector<std::int64_t> batch_sizes{64, 128, 256, 512, 1024, 2048};
  std::vector<int> epoch_counts{5, 10, 20, 50};
  std::vector<double> learning_rates{1e-5, 1e-4, 1e-3, 1e-2, 1e-1};
  std::vector<std::string> sweeps{"batch-size", "epochs", "learning-rate"};
  qnum::labs::add_common_options(app, common);
  app.add_option("--batch-sizes", batch_sizes, "the batch-size sweep")->delimiter(',')->capture_default_str();
  app.add_option("--epoch-counts", epoch_counts, "the epochs sweep")->delimiter(',')->capture_default_str();
  app.add_option("--learning-rates", learning_rates, "the learning-rate sweep")->delimiter(',')->capture_default_str();
  app.add_option("--sweeps", sweeps, "which sweeps to run: batch-size, epochs, learning-rate")
      ->delimiter(',')
      ->capture_default_str();

  return qnum::labs::run_main(app, argc, argv, [&] {
    using qnum::detail::require;
    qnum::labs::validate(common);
    const auto& spec = qnum::pipeline::model_spec(common.model);
    require(spec.input == qnum::pipeline::InputKind::features, "lab1-sweep trains feature-table models; '", common.model,
            "' takes ", qnum::pipeline::kind_name(spec.input), " (BERT: qnum train with --batch-size/--max-epochs/",
            "--learning-rate)");
    batch_sizes = qnum::labs::sorted_unique(batch_sizes, "--batch-sizes");
    epoch_counts = qnum::labs::sorted_unique(epoch_counts, "--epoch-counts");
    learning_rates = qnum::labs::sorted_unique(learning_rates, "--learning-rates");
    for (auto b : batch_sizes) require(b >= 1, "--batch-sizes: ", b, " must be >= 1");
    for (int e : epoch_counts) require(e >= 1, "--epoch-counts: ", e, " must be >= 1");
    for (double lr : learning_rates)
      require(std::isfinite(lr) && lr > 0, "--learning-rates: ", lr, " must be > 0");
    std::vector<Sweep> chosen;
    for (const auto& s : qnum::labs::sorted_unique(sweeps, "--sweeps")) {
      if (s == "batch-size")
        chosen.push_back({s, "batch size", 2, as_text(batch_sizes)});
      else if (s == "epochs")
        chosen.push_back({s, "epochs", 0, as_text(epoch_counts)});
      else if (s == "learning-rate")
        chosen.push_back({s, "learning rate", 10, as_text(learning_rates)});
      else
        qnum::detail::fail("--sweeps: unknown sweep '", s, "' (allowed: batch-size, epochs, learning-rate)");
    }
    if (common.threads > 0) qnum::set_num_threads(common.threads);
    const auto data = qnum::pipeline::load_dataset(common.dataset);
    qnum::pipeline::require_matching_data(common.model, common.dataset);
    const std::filesystem::path dir = common.output_dir.empty()
                                          ? std::filesystem::path("qnum-runs") / ("lab1-sweep_" + common.model + "_" +
                                                                                 common.dataset)
                                          : std::filesystem::path(common.output_dir);
    std::fprintf(stderr, "lab1-sweep: %s\n", data.summary().c_str());

    for (const Sweep& s : chosen) {
      std::string csv = "value,val_accuracy,test_accuracy,train_loss,seconds\n";
      std::printf("%s sweep (%s, others: batch %lld, %d epochs, lr %g)\n%12s %8s %8s %10s %8s\n", s.name.c_str(),
                  common.model.c_str(), static_cast<long long>(common.batch_size), common.epochs,
                  common.learning_rate, s.name.c_str(), "val_acc", "test_acc", "train_loss", "seconds");
      for (const auto& v : s.values) {
        qnum::train::TrainConfig c = qnum::pipeline::default_recipe(common.model);
        c.dataset = common.dataset;
        c.max_epochs = common.epochs;
        c.batch_size = common.batch_size;
        c.eval_batch_size = 1024;
        c.learning_rate = common.learning_rate;
        c.seed = common.seed;
        c.device = common.device;
        c.progress = false;
        if (s.name == "batch-size") c.batch_size = std::stoll(v);
        if (s.name == "epochs") c.max_epochs = std::stoi(v);
        if (s.name == "learning-rate") c.learning_rate = std::stod(v);
        c.output_dir = (dir / s.name / v).string();
        c.tensorboard_dir = qnum::labs::run_tensorboard_dir(common, dir, c.output_dir);
        c.precision = common.precision;
        if (common.progress) std::fprintf(stderr, "lab1-sweep: %s %s\n", s.name.c_str(), v.c_str());
        const Run r = train_one(common, data, c);
        csv += v + "," + LabBase::fmt(r.val_accuracy, 6) + "," + LabBase::fmt(r.test_accuracy, 6) + "," +
               LabBase::fmt(r.train_loss, 6) + "," + LabBase::fmt(r.seconds, 3) + "\n";
        std::printf("%12s %8.4f %8.4f %10.4f %8.2f\n", v.c_str(), r.val_accuracy, r.test_accuracy, r.train_loss,
                    r.seconds);
      }
      std::printf("\n");
      std::fflush(stdout);
      qnum::labs::write_results(dir / s.name, csv, plot_script(common, s), "lab1-sweep");
    }
  });
}

}  // namespace qnum::labs::lab1_sweep
