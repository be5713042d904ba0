// What the Lab 1 programs (lab1-ptq-qat, lab1-prune) share: the common options, training the
// fp32 model once, fresh copies of it, fine-tuning a copy, the results CSV, the gnuplot
// plot, and main()'s error handling (bad arguments: one line, exit 2).
//
// Runs are deterministic: the model's initialisation, the batch order and random pruning
// all come from --seed, and evaluation uses the dataset's fixed test split.
#pragma once

#include <CLI/CLI.hpp>
#if QNUM_WITH_CUDA
#include <qnum/cuda/backend.hpp>  // registers the CUDA backend: --device cuda
#endif

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "qnum/pipeline/datasets.hpp"
#include "qnum/pipeline/user_models.hpp"
#include "qnum/core/error.hpp"
#include "qnum/data/dataset.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/pipeline/registry.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/train/train.hpp"

namespace qnum::labs {

/// The options both programs take (registered on a CLI11 app by `add_common_options`).
struct CommonOptions {
  std::string model = "jsc-s";  ///< jsc-s: enough capacity that low widths/high sparsities visibly hurt
  std::string dataset = "jsc-synthetic";
  int epochs = 10;  ///< fp32 training epochs
  std::int64_t batch_size = 256;
  double learning_rate = 1e-3;
  double finetune_learning_rate = 1e-3;  ///< QAT / pruned fine-tuning
  std::uint64_t seed = 0;
  std::string output_dir;  ///< "" = qnum-runs/<program>_<model>_<dataset>
  int threads = 0;         ///< 0 = all
  std::string device = "cpu";  ///< where training runs; passes and scoring run on the host
  std::string tensorboard;     ///< "" = none; else each training run's TensorBoard log goes under it
  std::string precision = "fp32";  ///< the products' precision (tensor/precision.hpp) of every run and score
  bool progress = true;
};

inline void add_common_options(CLI::App& app, CommonOptions& o) {
  app.add_option(
         "--model", o.model,
         "JSC model (" +
             [] {
               std::string s;
               for (const auto& n : models::jsc_model_names()) s += (s.empty() ? "" : ", ") + n;
               return s;
             }() +
             ") or BERT model (bert-tiny, bert-mini, ..., bert:L-H-A-I)")
      ->capture_default_str();
  app.add_option("--dataset", o.dataset,
                 "JSC models: jsc-synthetic (offline) or jsc (the real file); BERT models: text-synthetic (offline, "
                 "the default for them) or imdb (QNUM_DATA_DIR)")
      ->capture_default_str();
  app.add_option("--epochs", o.epochs, "epochs of fp32 training")->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "rows per batch")->capture_default_str();
  app.add_option("--learning-rate", o.learning_rate, "Adam learning rate of fp32 training (cosine schedule)")
      ->capture_default_str();
  app.add_option("--finetune-learning-rate", o.finetune_learning_rate,
                 "Adam learning rate of the fine-tuning runs (cosine schedule over their epochs)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the model, the batch order and random pruning")->capture_default_str();
  app.add_option("--output-dir", o.output_dir, "where results.csv, plot.gp, plot.png and the runs go");
  app.add_option("--threads", o.threads, "threads (default: all)");
  app.add_option("--device", o.device, "where training runs: cpu or cuda (BERT models; a CUDA build)")
      ->capture_default_str();
  app.add_option("--tensorboard", o.tensorboard,
                 "TensorBoard logs of every training run under DIR, one folder per run (named as under "
                 "--output-dir): `tensorboard --logdir DIR` shows them side by side");
  app.add_option("--precision", o.precision,
                 "the products' precision of every training run and evaluation: fp32, or bf16 (bf16 operands, fp32 "
                 "accumulation and weights)")
      ->capture_default_str();
  app.add_flag("!--no-progress", o.progress, "no per-epoch progress lines on stderr");
}

/// The TensorBoard folder of a lab's training run in `run_dir`: <--tensorboard>/<the run's
/// path under the lab's folder `lab_dir`> (its name when it lies elsewhere); "" without
/// --tensorboard.
inline std::string run_tensorboard_dir(const CommonOptions& o, const std::filesystem::path& lab_dir,
                                       const std::filesystem::path& run_dir) {
  if (o.tensorboard.empty()) return {};
  std::filesystem::path rel = run_dir.lexically_relative(lab_dir);
  if (rel.empty() || *rel.begin() == "..") rel = run_dir.filename();
  return (std::filesystem::path(o.tensorboard) / rel).string();
}

/// Checks the common options (model and dataset names are checked when they are used).
inline void validate(const CommonOptions& o) {
  using qnum::detail::require;
  require(o.epochs >= 1, "--epochs must be >= 1, got ", o.epochs);
  require(o.batch_size >= 1, "--batch-size must be >= 1, got ", o.batch_size);
  require(std::isfinite(o.learning_rate) && o.learning_rate > 0, "--learning-rate must be > 0, got ", o.learning_rate);
  require(std::isfinite(o.finetune_learning_rate) && o.finetune_learning_rate > 0,
          "--finetune-learning-rate must be > 0, got ", o.finetune_learning_rate);
  require(o.threads >= 0, "--threads must be >= 1, got ", o.threads);
  require(find_precision(o.precision).has_value(), "--precision '", o.precision, "' is unknown (known: ",
          kKnownPrecisions, ")");
}

/// Sorted copy of `v`; duplicates are an error naming the option.
template <class T>
std::vector<T> sorted_unique(std::vector<T> v, const char* option) {
  qnum::detail::require(!v.empty(), option, " needs at least one value");
  std::sort(v.begin(), v.end());
  for (std::size_t i = 1; i < v.size(); ++i)
    qnum::detail::require(v[i] != v[i - 1], option, ": ", v[i], " appears twice");
  return v;
}

/// What every lab run has, whatever it trains: the options, the output folder, progress
/// lines and the fp32 accuracy the sweeps compare against.
class LabBase {
 public:
  const CommonOptions& options() const { return o_; }
  const std::filesystem::path& dir() const { return dir_; }
  double fp32_accuracy() const { return fp32_accuracy_; }

  /// A progress line on stderr, prefixed with the program's name.
  void note(const std::string& line) const {
    std::fprintf(stderr, "%s: %s\n", program_.c_str(), line.c_str());
    std::fflush(stderr);
  }

  static std::string fmt(double v, int digits = 4) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
  }

 protected:
  /// Writes `model` as <dir>/<name>.safetensors (+ .json): the weights with the model's name,
  /// dataset and structure (quantized layers, masks, adapters) and `extra`, so the next lab
  /// step (--load) and `qnum test` rebuild it. Returns the tensor file.
  std::filesystem::path save_model_with(nn::Module& model, const std::string& name, nlohmann::json extra) const {
    nlohmann::json meta{{"model", o_.model}, {"dataset", o_.dataset}, {"structure", passes::describe_structure(model)}};
    if (o_.precision != "fp32") meta["precision"] = o_.precision;  // qnum test / predict evaluate in it
    for (const auto& [k, v] : extra.items()) meta[k] = v;
    const auto file = train::save_checkpoint(dir_, name, model, nullptr, meta);
    note("saved " + file.string());
    return file;
  }

  /// Checks the options and sets the threads; the output folder is made by make_dir().
  LabBase(std::string program, CommonOptions o)
      : program_(std::move(program)), o_(std::move(o)), precision_((validate(o_), parse_precision(o_.precision))) {
    if (o_.threads > 0) set_num_threads(o_.threads);
    dir_ = o_.output_dir.empty() ? std::filesystem::path("qnum-runs") / (program_ + "_" + o_.model + "_" + o_.dataset)
                                 : std::filesystem::path(o_.output_dir);
  }
  /// Creates the output folder (after the data loaded: a bad name leaves no folder).
  void make_dir() const {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    qnum::detail::require(!ec, "cannot create output directory '", dir_.string(), "': ", ec.message());
  }

  std::string program_;
  CommonOptions o_;
  PrecisionScope precision_;  ///< the lab's products (training runs, PTQ scores, trials) in --precision
  std::filesystem::path dir_;
  double fp32_accuracy_ = 0.0;
  nlohmann::json structure_ = nullptr;  ///< of the loaded starting model (load_start), rebuilt in copies
};

/// A lab run on JSC: the data, the trained fp32 model's state, and where everything goes.
class Lab : public LabBase {
 public:
  using Model = nn::Sequential;

  /// Checks the options, loads the dataset and prepares the output directory; trains nothing.
  Lab(std::string program, CommonOptions o) : LabBase(std::move(program), std::move(o)) {
    make_model();                           // unknown names fail before any work
    data_ = pipeline::load_dataset(o_.dataset);      // before creating anything: a bad name leaves no folder
    make_dir();
    note(data_.summary());
  }

  const data::JscSplits& data() const { return data_; }

  /// Trains the fp32 model (output <dir>/fp32: metrics and best/last checkpoints), keeps the
  /// state of its best checkpoint (lowest validation loss, as MASE's lab keeps) and returns
  /// that model's test accuracy.
  double train_fp32() {
    note("training fp32 " + o_.model + " for " + std::to_string(o_.epochs) + " epochs");
    auto model = make_model();
    train::Trainer t(model, config("fp32", o_.epochs, o_.learning_rate, o_.seed));
    t.fit(data_.train, data_.val);
    model->to(Device::cpu());  // the passes read and rewrite weights on the host
    auto best = make_model();
    train::load_checkpoint(t.best_checkpoint(), *best, nullptr);
    trained_ = best->state_dict();
    fp32_accuracy_ = test_accuracy(*best);
    note("fp32 test accuracy " + fmt(fp32_accuracy_));
    return fp32_accuracy_;
  }

  /// Instead of train_fp32(): the starting model from a checkpoint of this model (e.g. the
  /// best model an earlier lab step saved; its quantized layers and masks are rebuilt).
  /// Returns its test accuracy.
  double load_start(const std::string& path) {
    const auto meta = train::read_checkpoint_meta(path);
    pipeline::require_checkpoint_of(o_.model, path, meta);
    structure_ = meta.value("structure", nlohmann::json(nullptr));
    auto m = make_model();
    if (!structure_.is_null()) passes::restore_structure(*m, structure_);
    train::load_checkpoint(path, *m, nullptr);
    trained_ = m->state_dict();
    fp32_accuracy_ = test_accuracy(*m);
    note("loaded " + path + ": test accuracy " + fmt(fp32_accuracy_));
    return fp32_accuracy_;
  }

  /// A fresh model of the same architecture (and loaded structure) holding the trained state.
  std::shared_ptr<nn::Sequential> trained_copy() const {
    qnum::detail::require(!trained_.empty(), "internal: trained_copy() before train_fp32()");
    auto m = make_model();
    if (!structure_.is_null()) passes::restore_structure(*m, structure_);
    m->load_state_dict(trained_);
    return m;
  }

  /// Saves `model` as <dir>/<name>.safetensors for the next lab step (--load).
  std::filesystem::path save_model(nn::Module& model, const std::string& name) const {
    return save_model_with(model, name, pipeline::feature_metadata(data_));
  }

  /// Fine-tunes `model` in place for `epochs` (run folder <dir>/<run>); the model as it is
  /// after the last epoch is what the caller evaluates. The batch order is seeded apart from
  /// the fp32 run's.
  void finetune(const std::shared_ptr<nn::Sequential>& model, const std::string& run, int epochs) const {
    if (epochs <= 0) return;
    train::Trainer t(model, config(run, epochs, o_.finetune_learning_rate, nn::detail::derive_seed(o_.seed, 1)));
    t.fit(data_.train, data_.val);
    model->to(Device::cpu());
  }

  /// The recipe finetune() trains with, for a run folder `run` (absolute, or under <dir>)
  /// and `epochs`: what a search's per-trial fine-tuning (lab3) uses.
  train::TrainConfig finetune_config(const std::string& run, int epochs) const {
    return config(run, epochs, o_.finetune_learning_rate, nn::detail::derive_seed(o_.seed, 1));
  }
  /// Rows per evaluation batch.
  std::int64_t eval_batch_size() const { return std::max<std::int64_t>(o_.batch_size, 1024); }

  /// Accuracy on the test split.
  double test_accuracy(nn::Module& model) const {
    return train::evaluate(model, data_.test, std::max<std::int64_t>(o_.batch_size, 1024)).accuracy;
  }
  double test_accuracy(const std::shared_ptr<nn::Sequential>& model) const { return test_accuracy(*model); }

  /// Runs `model` (eval mode, no gradients) on the first `batches` training batches in
  /// dataset order: the calibration of global activation pruning.
  void calibrate(nn::Module& model, int batches) const {
    int n = 0;
    for (const auto& b : data::batches(data_.train, {o_.batch_size, false, false, 0})) {
      if (n++ == batches) break;
      model(b.features);
    }
  }

 private:
  /// A fresh model of --model through the registry (the zoo, jsc-seq:/jsc-mlp: stacks, a
  /// $QNUM_MODELS name), initialised from --seed.
  std::shared_ptr<nn::Sequential> make_model() const {
    auto m = std::dynamic_pointer_cast<nn::Sequential>(pipeline::make_classifier(o_.model, {o_.seed}).module);
    qnum::detail::require(m != nullptr, "model '", o_.model,
                          "': the lab programs take feature models built as a layer stack (Sequential)");
    return m;
  }

  train::TrainConfig config(const std::string& run, int epochs, double lr, std::uint64_t seed) const {
    train::TrainConfig c;
    c.model = o_.model;
    c.dataset = o_.dataset;
    c.max_epochs = epochs;
    c.batch_size = o_.batch_size;
    c.learning_rate = lr;
    c.seed = seed;
    c.threads = o_.threads;
    c.device = o_.device;
    c.output_dir = (dir_ / run).string();
    c.tensorboard_dir = run_tensorboard_dir(o_, dir_, c.output_dir);
    c.precision = o_.precision;
    c.progress = o_.progress;
    return c;
  }

  data::JscSplits data_;
  std::map<std::string, Tensor> trained_;
};

/// The gnuplot to run: $QNUM_GNUPLOT when set (an empty or missing path counts as "not
/// installed"), else `gnuplot` on PATH.
inline std::optional<std::string> find_gnuplot() {
  auto executable = [](const std::filesystem::path& p) {
    std::error_code ec;
    return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (const char* env = std::getenv("QNUM_GNUPLOT"))
    return executable(env) ? std::optional<std::string>(env) : std::nullopt;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string d = dirs.substr(start, end - start);
    const auto candidate = std::filesystem::path(d.empty() ? "." : d) / "gnuplot";
    if (executable(candidate)) return candidate.string();
    start = end + 1;
  }
  return std::nullopt;
}

/// The gnuplot preamble of both scripts: PNG through cairo when this gnuplot has it (Debian's
/// gnuplot-nox does), else libgd's png; the output name can be overridden (-e "out='x.png'").
inline std::string gnuplot_preamble(const std::string& comment) {
  return "# " + comment +
         "\n# Re-plot: run `gnuplot plot.gp` in this folder (writes plot.png).\n"
         "if (!exists(\"out\")) out = \"plot.png\"\n"
         "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {\n"
         "  set terminal pngcairo size 960,640 noenhanced font \"DejaVu Sans,12\" linewidth 1.5\n"
         "} else {\n"
         "  set terminal png size 960,640 noenhanced\n"
         "}\n"
         "set output out\n"
         "set datafile separator \",\"\n"
         "set grid\n"
         "set key outside right top box\n";
}

/// results.csv of a search lab: trial, then each curve's best-so-far value ("" before any);
/// `name_of(curve)` names a column, `curve.best` holds the values.
template <class Curve, class NameOf>
std::string best_so_far_csv(const std::vector<Curve>& curves, NameOf name_of) {
  std::string csv = "trial";
  std::size_t n = 0;
  for (const auto& c : curves) csv += "," + std::string(name_of(c)), n = std::max(n, c.best.size());
  csv += "\n";
  for (std::size_t i = 0; i < n; ++i) {
    csv += std::to_string(i);
    for (const auto& c : curves)
      csv += "," + (i < c.best.size() && !std::isnan(c.best[i]) ? LabBase::fmt(c.best[i], 6) : std::string(""));
    csv += "\n";
  }
  return csv;
}

/// The gnuplot script of a search lab: one best-so-far line per curve (results.csv columns
/// 2 .. curves+1, named by the header), and a dashed reference line at `reference`.
inline std::string best_so_far_script(const std::string& comment, const std::string& title, std::size_t curves,
                                      double reference, const std::string& reference_title) {
  char ref[64];
  std::snprintf(ref, sizeof ref, "%.6f", reference);
  // A long title is split after its first ": " (one line is clipped at 960 px with the key
  // outside); few trials get integer ticks (gnuplot would label 0.5 steps).
  std::string shown = title;
  if (const auto colon = shown.find(": "); colon != std::string::npos && shown.size() > 60)
    shown = shown.substr(0, colon + 1) + "\\n" + shown.substr(colon + 2);
  return gnuplot_preamble(comment) + "set title \"" + shown +
         "\"\n"
         "set xlabel \"trial\"\n"
         "set ylabel \"best validation accuracy so far\"\n"
         "stats \"results.csv\" using 1 nooutput\n"
         "if (STATS_max <= 20) set xtics 1\n"
         "set key autotitle columnhead\n"
         "plot for [i=2:" +
         std::to_string(curves + 1) +
         "] \"results.csv\" using 1:i with linespoints pt 7 ps 0.6, \\\n"
         "     " +
         ref + " with lines dt 2 lc rgb \"gray40\" title \"" + reference_title + "\"\n";
}

/// What happened to the plot.
enum class PlotResult { written, no_gnuplot };

/// Writes <dir>/results.csv and <dir>/plot.gp atomically, then runs gnuplot in <dir> to make
/// <dir>/plot.png (through a temporary name, renamed when gnuplot succeeds). Without gnuplot
/// it says how to install it and returns no_gnuplot; a failing gnuplot is a std::runtime_error.
inline PlotResult write_results(const std::filesystem::path& dir, const std::string& csv, const std::string& script,
                                const std::string& program) {
  write_file_atomic(dir / "results.csv", csv);
  write_file_atomic(dir / "plot.gp", script);
  const auto gnuplot = find_gnuplot();
  if (!gnuplot) {
    std::fprintf(stderr,
                 "%s: gnuplot not found, so no plot.png: install it (Debian: apt-get install gnuplot-nox, or run "
                 "scripts/install-deps.sh), then run `gnuplot plot.gp` in %s. The results are in %s and the plot "
                 "script in %s.\n",
                 program.c_str(), dir.string().c_str(), (dir / "results.csv").string().c_str(),
                 (dir / "plot.gp").string().c_str());
    return PlotResult::no_gnuplot;
  }
  const std::string tmp = ".plot.png.tmp";
  std::filesystem::remove(dir / tmp);
  const std::string setting = "out='" + tmp + "'";
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  qnum::detail::require(pid >= 0, "cannot start gnuplot: fork failed: ", std::strerror(errno));
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) _exit(126);
    const char* argv[] = {gnuplot->c_str(), "-e", setting.c_str(), "plot.gp", nullptr};
    ::execv(gnuplot->c_str(), const_cast<char* const*>(argv));
    _exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && std::filesystem::exists(dir / tmp);
  if (!ok) {
    std::filesystem::remove(dir / tmp);
    // Not the user's arguments: a runtime failure (exit 1), the CSV already written.
    throw std::runtime_error(
        "gnuplot (" + *gnuplot + ") failed on " + (dir / "plot.gp").string() +
        (WIFEXITED(status) ? " with exit code " + std::to_string(WEXITSTATUS(status)) : std::string(" (killed)")) +
        "; the results are in " + (dir / "results.csv").string());
  }
  std::filesystem::rename(dir / tmp, dir / "plot.png");
  return PlotResult::written;
}

/// Runs a lab's main: parses argv with `app`, then `body`. CLI11 errors and qnum::Error (bad
/// arguments, names, data) print one line "<program>: error: ..." and exit 2; other
/// failures exit 1.
inline int run_main(CLI::App& app, int argc, char** argv, const std::function<void()>& body) {
  const std::string program = app.get_name();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
    return 2;
  }
  try {
    pipeline::register_models_from_env();  // the user's own model names ($QNUM_MODELS)
    body();
  } catch (const qnum::Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
    return 1;
  }
  return 0;
}

}  // namespace qnum::labs
