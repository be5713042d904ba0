// lab0-graph: MASE's tutorial 1 / lab 0 on BERT — the model's op graph as MASE draws it with
// different `hf_input_names`, and the two toy passes that count and remove dropout.
//
// Traces the model (passes::trace) on a batch of the dataset's first training texts with
//   input_ids                            (MASE's default: only input_ids drives the graph)
//   input_ids, attention_mask            (the mask becomes an op on its own input)
//   input_ids, attention_mask, labels    (the loss is part of the graph)
// and writes for each variant graph-<variant>.txt (the graph report: nodes, kinds, layers),
// graph-<variant>.dot and, when Graphviz's `dot` is installed, graph-<variant>.svg. Then on
// the last graph: counts the dropout nodes, removes them as the tutorial does (each use
// replaced by the node's input, the node erased: passes::remove_nodes) into
// graph-no-dropout.*, and removes dropout from the model itself (passes::remove_dropout:
// every Dropout an identity), checking that training-mode logits then equal eval-mode ones.
// results.csv has one row per graph (node counts by kind, dropout nodes); plot.gp/plot.png
// draws them; dropout.csv holds the dropout checks.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "labs.hpp"
#include "qnum/pipeline/bert_run.hpp"
#include "lab_common.hpp"
#include "qnum/passes/dropout.hpp"
#include "qnum/passes/report.hpp"
#include "qnum/passes/trace.hpp"

namespace qnum::labs::lab0_graph {

namespace passes = qnum::passes;
using qnum::Tensor;

Tensor as_tensor(const std::vector<std::int64_t>& v, qnum::Shape shape) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor(std::move(shape), std::move(f));
}

/// Runs Graphviz's dot on `dot_file` into `svg_file`; false when dot is not installed.
bool render_svg(const std::filesystem::path& dot_file, const std::filesystem::path& svg_file) {
  static const bool have_dot = std::system("command -v dot >/dev/null 2>&1") == 0;
  if (!have_dot) return false;
  const auto tmp = svg_file.string() + ".tmp";
  const std::string cmd = "dot -Tsvg '" + dot_file.string() + "' -o '" + tmp + "'";
  if (std::system(cmd.c_str()) != 0) {
    std::filesystem::remove(tmp);
    throw std::runtime_error("Graphviz dot failed on " + dot_file.string());
  }
  std::filesystem::rename(tmp, svg_file);
  return true;
}

/// max |a - b| over two tensors of one shape.
double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.values().size(); ++i)
    m = std::max(m, std::abs(static_cast<double>(a.values()[i]) - b.values()[i]));
  return m;
}


int run(int argc, char** argv) {
  CLI::App app{"MASE lab 0 on BERT: the op graph with and without attention mask and labels; dropout count and removal",
               "lab0-graph"};
  std::string model_name = "bert-tiny", dataset = "text-synthetic", load, output_dir;
  std::int64_t max_length = 32, batch = 2;
  std::uint64_t seed = 0;
  app.add_option("--model", model_name, "BERT model (bert-tiny, bert-mini, ..., bert:L-H-A-I)")->capture_default_str();
  app.add_option("--load", load, "weights: a qnum checkpoint or a Hugging Face safetensors file (config.json beside)");
  app.add_option("--dataset", dataset, "where the example batch comes from: text-synthetic or imdb")
      ->capture_default_str();
  app.add_option("--max-length", max_length, "tokens per text of the example batch")->capture_default_str();
  app.add_option("--batch", batch, "texts in the example batch (the first training texts)")->capture_default_str();
  app.add_option("--seed", seed, "seed of the model's initialisation (without --load)")->capture_default_str();
  app.add_option("--output-dir", output_dir, "where the graphs, results.csv and plot go");

  return qnum::labs::run_main(app, argc, argv, [&] {
    using qnum::detail::require;
    require(max_length >= 2, "--max-length must be >= 2 ([CLS] and [SEP]), got ", max_length);
    require(batch >= 1, "--batch must be >= 1, got ", batch);
    qnum::pipeline::bert_config_of(model_name);  // unknown names fail before any work
    const auto data = qnum::pipeline::load_text_splits(dataset, max_length, batch);
    const std::filesystem::path dir =
        output_dir.empty() ? std::filesystem::path("qnum-runs") / ("lab0-graph_" + model_name + "_" + dataset)
                           : std::filesystem::path(output_dir);
    auto model = std::make_shared<qnum::models::BertForSequenceClassification>(
        qnum::pipeline::bert_run_config(model_name, load, data), seed);
    if (!load.empty()) qnum::pipeline::load_bert_weights(*model, load);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    require(!ec, "cannot create output directory '", dir.string(), "': ", ec.message());

    // The example batch: the first training texts, padded to the longest (dynamic padding).
    const auto first = qnum::data::batches(data.train, {batch, false, false, 0, 1})[0];
    const qnum::Shape ids_shape{first.batch_size, first.seq_len};
    const Tensor ids = as_tensor(first.input_ids, ids_shape), mask = as_tensor(first.attention_mask, ids_shape);
    const Tensor labels = as_tensor(first.labels, {first.batch_size});

    struct Variant {
      std::string name;
      std::vector<passes::TraceInput> inputs;
      std::function<Tensor()> run;
    };
    const std::vector<Variant> variants{
        {"input_ids", {{"input_ids", ids}}, [&] { return model->forward(ids, Tensor()); }},
        {"input_ids-attention_mask",
         {{"input_ids", ids}, {"attention_mask", mask}},
         [&] { return model->forward(ids, mask); }},
        {"input_ids-attention_mask-labels",
         {{"input_ids", ids}, {"attention_mask", mask}, {"labels", labels}},
         [&] { return qnum::cross_entropy(model->forward(ids, mask), labels); }},
    };

    std::string csv = "graph,nodes,placeholder,call_module,call_function,output,dropout\n";
    bool svg = false;
    auto record = [&](const std::string& name, const passes::Trace& t) {
      const auto c = t.counts();
      csv += name + "," + std::to_string(t.nodes.size()) + "," + std::to_string(c.at("placeholder")) + "," +
             std::to_string(c.at("call_module")) + "," + std::to_string(c.at("call_function")) + "," +
             std::to_string(c.at("output")) + "," + std::to_string(passes::count_op(t, "dropout")) + "\n";
      const auto base = dir / ("graph-" + name);
      qnum::write_file_atomic(base.string() + ".txt", passes::graph_report(t));
      qnum::write_file_atomic(base.string() + ".dot", passes::to_dot(t, model_name + " (" + name + ")"));
      svg = render_svg(base.string() + ".dot", base.string() + ".svg");
      std::printf("%-34s %5zu nodes: placeholder %d, call_module %d, call_function %d, output %d; dropout %d\n",
                  name.c_str(), t.nodes.size(), c.at("placeholder"), c.at("call_module"), c.at("call_function"),
                  c.at("output"), passes::count_op(t, "dropout"));
    };

    std::printf("lab0-graph  %s (%lld parameters) on a batch of %lld x %lld tokens from %s\n\n", model_name.c_str(),
                static_cast<long long>(model->num_parameters()), static_cast<long long>(first.batch_size),
                static_cast<long long>(first.seq_len), dataset.c_str());
    passes::Trace last;
    for (const auto& v : variants) {
      last = passes::trace(*model, v.inputs, v.run);
      record(v.name, last);
    }

    // Tutorial 1's passes on the last graph: count dropout nodes, then remove them.
    const int dropout_nodes = passes::count_op(last, "dropout");
    const int removed = passes::remove_nodes(last, [](const passes::TraceNode& n) { return n.op == "dropout"; });
    record("no-dropout", last);
    std::printf("\ndropout nodes %d, removed %d, left %d\n", dropout_nodes, removed, passes::count_op(last, "dropout"));

    // The same on the model: training-mode logits differ from eval-mode ones while dropout is
    // active and equal them once every Dropout is an identity.
    auto logits = [&](bool training) {
      qnum::autograd::NoGradGuard no_grad;
      model->train(training);
      const Tensor y = model->forward(ids, mask);
      model->eval();
      return y;
    };
    const Tensor eval_before = logits(false);
    const double before = max_abs_diff(logits(true), eval_before);
    const auto count = passes::remove_dropout(*model);
    const double after = max_abs_diff(logits(true), logits(false));
    const std::string dropout_csv =
        "stage,graph_dropout_nodes,model_dropout_layers,active_dropout_layers,"
        "train_vs_eval_max_abs_diff\nbefore," +
        std::to_string(dropout_nodes) + "," + std::to_string(count.layers) + "," + std::to_string(count.active) + "," +
        qnum::labs::LabBase::fmt(before, 9) + "\nafter," + std::to_string(passes::count_op(last, "dropout")) + "," +
        std::to_string(count.layers) + ",0," + qnum::labs::LabBase::fmt(after, 9) + "\n";
    qnum::write_file_atomic(dir / "dropout.csv", dropout_csv);
    std::printf(
        "model: %lld Dropout layers (%lld active) set to identity; training-mode vs eval-mode logits: "
        "max |diff| %.3g before, %.3g after\n",
        static_cast<long long>(count.layers), static_cast<long long>(count.active), before, after);
    require(after == 0.0, "internal: training-mode logits still differ from eval-mode ones after removing dropout");

    const std::string script =
        qnum::labs::gnuplot_preamble("lab0-graph: graph nodes by kind per traced variant (results.csv)") +
        "set title \"" + model_name +
        ": op graph nodes by kind\"\n"
        "set style data histograms\n"
        "set style histogram rowstacked\n"
        "set style fill solid 0.8 border -1\n"
        "set boxwidth 0.6\n"
        "set ylabel \"nodes\"\n"
        "set xtics rotate by -20\n"
        "plot \"results.csv\" skip 1 using 3:xtic(1) title \"placeholder\", \"\" skip 1 using 4 title "
        "\"call_module\", \"\" skip 1 using 5 title \"call_function\", \"\" skip 1 using 6 title \"output\"\n";
    const auto plot = qnum::labs::write_results(dir, csv, script, "lab0-graph");
    std::printf("\nresults  %s\n", (dir / "results.csv").string().c_str());
    std::printf("dropout  %s\n", (dir / "dropout.csv").string().c_str());
    std::printf("graphs   %s/graph-*.txt, .dot%s\n", dir.string().c_str(),
                svg ? ", .svg" : " (no .svg: install Graphviz for dot)");
    std::printf("plot     %s\n", plot == qnum::labs::PlotResult::written ? (dir / "plot.png").string().c_str()
                                                                         : "(not drawn: gnuplot missing)");
  });
}

}  // namespace qnum::labs::lab0_graph
