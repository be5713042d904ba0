// `qnum predict MODEL --load CKPT [INPUT ...]`: a trained classifier on the user's own inputs
// (INPUT arguments, else the lines of --input FILE, else the lines of stdin; empty lines are
// skipped), printed one line each: the label, the class probabilities and the input (or, with
// --json, one JSON object per line, with the logits and, for text, the token ids).
// - A text model (BERT): each input is a text, tokenized as the model's training data were —
//   the checkpoint's tokenizer fingerprint must match the dataset's tokenizer — and truncated to
//   the run's max_length.
// - A feature model (JSC): each input is a row of comma-separated raw feature values (a header
//   line of the feature names is skipped), standardised with the training split's statistics
//   that the checkpoint records.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/pipeline/bert_run.hpp"
#include "qnum/pipeline/datasets.hpp"
#include "qnum/core/error.hpp"
#include "qnum/data/jsc.hpp"
#include "qnum/data/text.hpp"
#include "qnum/pipeline/registry.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/tensor/autograd.hpp"
#include "qnum/tensor/ops.hpp"
#include "qnum/train/checkpoint.hpp"

namespace qnum::cli {

/// The `predict` subcommand.
class PredictCommand {
 public:
  explicit PredictCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("predict",
                              "Classify your own inputs with a trained model: texts (BERT) or feature rows (JSC)");
    cmd_->add_option("MODEL", model_, "the model the checkpoint holds (e.g. bert-tiny, jsc-tiny)")->required();
    cmd_->add_option("INPUT", inputs_,
                     "texts, or rows of comma-separated features (default: --input FILE, else stdin, one per line)");
    cmd_->add_option("--load", load_, "the checkpoint (qnum train's best/last, a lab's best)")->required();
    cmd_->add_option("--input", input_, "a file with one input per line");
    cmd_->add_option("--batch-size", batch_size_, "inputs per forward pass (default 64)");
    cmd_->add_option("--device", device_, "where to run: cpu (default) or cuda")->capture_default_str();
    cmd_->add_option("--precision", precision_,
                     "the products' precision: fp32 or bf16 (default: the run's, as its checkpoint records)");
    cmd_->add_flag("--json", json_, "one JSON object per input: input, label, label_index, probabilities, logits (text: token_ids)");
  }
  PredictCommand(const PredictCommand&) = delete;
  PredictCommand& operator=(const PredictCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }

  void run() const {
    qnum::detail::require(batch_size_ >= 1, "predict: --batch-size must be >= 1, got ", batch_size_);
    const bool text = pipeline::model_spec(model_).input == pipeline::InputKind::tokens;
    const nlohmann::json meta = train::read_checkpoint_meta(load_);
    pipeline::require_checkpoint_of(model_, load_, meta);
    std::vector<std::string> inputs = read_inputs();
    pipeline::BuildOptions bo;
    bo.config = meta.value("model_config", nlohmann::json(nullptr));
    const pipeline::Classifier m = pipeline::make_classifier(model_, bo);
    if (meta.contains("structure")) passes::restore_structure(*m.module, meta["structure"]);
    train::load_checkpoint(load_, *m.module, nullptr);
    m.module->to(Device::parse(device_));
    m.module->eval();
    const PrecisionScope precision(parse_precision(cmd_->get_option("--precision")->count() > 0 ? precision_ : train::checkpoint_precision(meta)));
    if (text) {
      const data::TokenDataset tokens = tokenize(meta, inputs);
      print(m, data::batches(tokens, {batch_size_, false, false, 0}), data::text_dataset_labels(), inputs, &tokens);
    } else {
      const data::Dataset rows = feature_rows(meta, inputs);
      print(m, data::batches(rows, {batch_size_, false, false, 0}), meta["labels"].get<std::vector<std::string>>(),
            inputs);
    }
  }

 private:
  /// The texts tokenized as the checkpoint's training data were.
  data::TokenDataset tokenize(const nlohmann::json& meta, const std::vector<std::string>& texts) const {
    const auto tok = pipeline::checkpoint_tokenizer(meta, load_, "predict");
    data::TextTable table;
    for (const auto& t : texts) table.rows.push_back({t, 0, 0, -1});
    return data::tokenize_table(table, *tok, pipeline::run_max_length(meta, 0));
  }

  /// The rows parsed (a header line of the feature names dropped from `rows`) and standardised
  /// with the statistics the checkpoint records.
  data::Dataset feature_rows(const nlohmann::json& meta, std::vector<std::string>& rows) const {
    const nlohmann::json& f = meta.value("features", nlohmann::json());
    qnum::detail::require(
        f.is_object() && f.contains("mean") && f.contains("scale") && f.contains("names") && meta.contains("labels"),
        "predict: checkpoint '", load_, "' records no feature statistics (train it with this qnum to predict with it)");
    data::Standardizer scaler{f["mean"].get<std::vector<double>>(), f["scale"].get<std::vector<double>>()};
    const auto names = f["names"].get<std::vector<std::string>>();
    const std::size_t width = scaler.mean.size();
    qnum::detail::require(width > 0 && scaler.scale.size() == width && names.size() == width, "predict: checkpoint '",
                          load_, "' has inconsistent feature statistics");
    std::string header;
    for (const auto& n : names) header += (header.empty() ? "" : ",") + n;
    const auto cells_of = [](const std::string& row) { return data::detail::split_commas(row); };
    if (!rows.empty()) {  // a header line naming the model's features in order is skipped
      const auto cells = cells_of(rows.front());
      if (std::equal(cells.begin(), cells.end(), names.begin(), names.end())) rows.erase(rows.begin());
    }
    qnum::detail::require(!rows.empty(), "predict: no rows to classify (only the header line)");
    data::Dataset d;
    d.features = Tensor::zeros({static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(width)});
    d.labels.assign(rows.size(), 0);
    d.num_classes = static_cast<std::int64_t>(meta["labels"].size());
    float* x = d.features.data();
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const auto cells = cells_of(rows[r]);
      qnum::detail::require(cells.size() == width, "predict: row ", r + 1, " has ", cells.size(),
                            " values, the model takes ", width, " (", header, ")");
      for (std::size_t c = 0; c < width; ++c) {
        const auto v = data::detail::parse_number(cells[c]);
        qnum::detail::require(v && std::abs(*v) <= std::numeric_limits<float>::max(), "predict: row ", r + 1, ", ",
                              names[c], ": '", cells[c], "' is not a finite float32 number");
        x[r * width + c] = static_cast<float>(*v);
      }
    }
    scaler.apply(d.features);
    return d;
  }

  /// One line per input: label, probabilities, input (or a JSON object).
  void print(const pipeline::Classifier& m, data::BatchIterator batches, const std::vector<std::string>& names,
             const std::vector<std::string>& inputs, const data::TokenDataset* tokens = nullptr) const {
    autograd::NoGradGuard no_grad;
    for (const data::Batch& b : batches) {
      const Tensor logits = m.forward(b).to(Device::cpu());
      const Tensor probs = softmax(logits, 1);
      const std::int64_t c = probs.size(1);
      for (std::int64_t i = 0; i < b.batch_size; ++i) {
        const float* p = probs.data() + i * c;
        std::int64_t arg = 0;
        for (std::int64_t k = 1; k < c; ++k)
          if (p[k] > p[arg]) arg = k;
        const std::string label =
            arg < static_cast<std::int64_t>(names.size()) ? names[static_cast<std::size_t>(arg)] : std::to_string(arg);
        const std::int64_t row = b.indices[static_cast<std::size_t>(i)];
        const std::string& input = inputs[static_cast<std::size_t>(row)];
        if (json_) {
          nlohmann::ordered_json j{{"input", input}, {"label", label}, {"label_index", arg}};
          j["probabilities"] = std::vector<float>(p, p + c);
          j["logits"] = std::vector<float>(logits.data() + i * c, logits.data() + (i + 1) * c);
          if (tokens) {
            const auto ids = tokens->example(row);
            j["token_ids"] = std::vector<std::int32_t>(ids.begin(), ids.end());
          }
          std::cout << j.dump() << "\n";
        } else {
          std::string line = label;
          char prob[32];
          for (std::int64_t k = 0; k < c; ++k) {
            std::snprintf(prob, sizeof prob, "%s%.4f", k ? " " : "\t", static_cast<double>(p[k]));
            line += prob;
          }
          std::cout << line << "\t" << input << "\n";
        }
      }
    }
    std::cout.flush();
  }

  std::vector<std::string> read_inputs() const {
    std::vector<std::string> out;
    for (const auto& t : inputs_)
      if (!t.empty()) out.push_back(t);
    if (inputs_.empty()) {
      auto read = [&](std::istream& in) {
        for (std::string line; std::getline(in, line);) {
          if (!line.empty() && line.back() == '\r') line.pop_back();
          if (!line.empty()) out.push_back(line);
        }
      };
      if (!input_.empty()) {
        std::ifstream in(input_);
        qnum::detail::require(in.good(), "predict: cannot read --input '", input_, "'");
        read(in);
      } else {
        read(std::cin);
      }
    }
    qnum::detail::require(!out.empty(), "predict: nothing to classify (give INPUT arguments, --input FILE or lines on ",
                          "stdin; empty lines are skipped)");
    return out;
  }

  CLI::App* cmd_ = nullptr;
  std::string model_, load_, input_, device_ = "cpu", precision_;
  std::vector<std::string> inputs_;
  std::int64_t batch_size_ = 64;
  bool json_ = false;
};

}  // namespace qnum::cli
