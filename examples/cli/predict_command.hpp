// `qnum predict MODEL --load CKPT [TEXT ...]`: a trained text classifier on the user's own
// sentences (TEXT arguments, else the lines of --input FILE, else the lines of stdin; empty
// lines are skipped). Each text is tokenized as the model's training data were — the
// checkpoint's tokenizer fingerprint must match the dataset's tokenizer — truncated to the
// run's max_length, and printed as one line: the label, the class probabilities and the text
// (or, with --json, one JSON object per line).
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "datasets.hpp"
#include "qnum/core/error.hpp"
#include "qnum/data/text.hpp"
#include "qnum/models/registry.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/tensor/autograd.hpp"
#include "qnum/tensor/ops.hpp"
#include "qnum/train/checkpoint.hpp"

namespace qnum::cli {

/// The `predict` subcommand.
class PredictCommand {
 public:
  explicit PredictCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("predict", "Classify your own texts with a trained text model (label and probabilities)");
    cmd_->add_option("MODEL", model_, "the model the checkpoint holds (e.g. bert-tiny)")->required();
    cmd_->add_option("TEXT", texts_, "texts to classify (default: --input FILE, else stdin, one text per line)");
    cmd_->add_option("--load", load_, "the checkpoint (qnum train's best/last)")->required();
    cmd_->add_option("--input", input_, "a file with one text per line");
    cmd_->add_option("--batch-size", batch_size_, "texts per forward pass (default 64)");
    cmd_->add_option("--device", device_, "where to run: cpu (default) or cuda")->capture_default_str();
    cmd_->add_flag("--json", json_, "one JSON object per text: text, label, label_index, probabilities");
  }
  PredictCommand(const PredictCommand&) = delete;
  PredictCommand& operator=(const PredictCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }

  void run() const {
    qnum::detail::require(batch_size_ >= 1, "predict: --batch-size must be >= 1, got ", batch_size_);
    const models::ModelSpec& spec = models::model_spec(model_);
    qnum::detail::require(spec.input == models::InputKind::tokens, "predict: model '", model_, "' takes ",
                          models::kind_name(spec.input), "; predict classifies texts (give a text model, e.g. bert-tiny)");
    const nlohmann::json meta = train::read_checkpoint_meta(load_);
    require_checkpoint_of(model_, load_, meta);
    qnum::detail::require(meta.contains("tokenizer_fingerprint") && meta.contains("dataset"), "predict: checkpoint '",
                          load_, "' records no tokenizer fingerprint (train it with this qnum to predict with it)");
    const std::string dataset = meta["dataset"].get<std::string>();
    const auto tok = data::text_dataset_tokenizer(dataset);
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(tok->fingerprint()));
    qnum::detail::require(meta["tokenizer_fingerprint"] == hex, "predict: the tokenizer of '", dataset,
                          "' here (fingerprint ", hex, ") is not the one the checkpoint was trained with (",
                          meta["tokenizer_fingerprint"].get<std::string>(), ")");

    const std::vector<std::string> texts = read_texts();
    std::int64_t max_length = 512;
    if (meta.contains("config") && meta["config"].value("max_length", 0) >= 2)
      max_length = meta["config"]["max_length"].get<std::int64_t>();
    models::BuildOptions bo;
    bo.config = meta.value("model_config", nlohmann::json(nullptr));
    const models::Classifier m = models::make_classifier(model_, bo);
    if (meta.contains("structure")) passes::restore_structure(*m.module, meta["structure"]);
    train::load_checkpoint(load_, *m.module, nullptr);
    m.module->to(Device::parse(device_));

    data::TextTable table;
    for (const auto& t : texts) table.rows.push_back({t, 0, 0, -1});
    const data::TokenDataset tokens = data::tokenize_table(table, *tok, max_length);
    const auto names = data::text_dataset_labels();
    m.module->eval();
    autograd::NoGradGuard no_grad;
    for (const data::Batch& b : data::batches(tokens, {batch_size_, false, false, 0})) {
      const Tensor probs = softmax(m.forward(b), 1).to(Device::cpu());
      const std::int64_t c = probs.size(1);
      for (std::int64_t i = 0; i < b.batch_size; ++i) {
        const float* p = probs.data() + i * c;
        std::int64_t arg = 0;
        for (std::int64_t k = 1; k < c; ++k)
          if (p[k] > p[arg]) arg = k;
        const std::string label =
            arg < static_cast<std::int64_t>(names.size()) ? names[static_cast<std::size_t>(arg)] : std::to_string(arg);
        const std::string& text = texts[static_cast<std::size_t>(b.indices[static_cast<std::size_t>(i)])];
        if (json_) {
          nlohmann::ordered_json j{{"text", text}, {"label", label}, {"label_index", arg}};
          j["probabilities"] = std::vector<float>(p, p + c);
          std::cout << j.dump() << "\n";
        } else {
          std::string line = label;
          char prob[32];
          for (std::int64_t k = 0; k < c; ++k) {
            std::snprintf(prob, sizeof prob, "%s%.4f", k ? " " : "\t", static_cast<double>(p[k]));
            line += prob;
          }
          std::cout << line << "\t" << text << "\n";
        }
      }
    }
    std::cout.flush();
  }

 private:
  std::vector<std::string> read_texts() const {
    std::vector<std::string> out;
    for (const auto& t : texts_)
      if (!t.empty()) out.push_back(t);
    if (texts_.empty()) {
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
    qnum::detail::require(!out.empty(), "predict: no text to classify (give TEXT arguments, --input FILE or lines on ",
                          "stdin; empty lines are skipped)");
    return out;
  }

  CLI::App* cmd_ = nullptr;
  std::string model_, load_, input_, device_ = "cpu";
  std::vector<std::string> texts_;
  std::int64_t batch_size_ = 64;
  bool json_ = false;
};

}  // namespace qnum::cli
