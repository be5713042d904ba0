// `qnum export MODEL --load CKPT --to hf --output-dir DIR`: a trained, quantized, pruned or
// LoRA-adapted BERT out of qnum, as a Hugging Face folder that transformers loads
// (models/bert_export.hpp; docs/export.md). `--to packed-int8 | packed-mxint8`: the same model
// with every Linear packed (models/bert_packed.hpp), as a checkpoint of codes and scales. The tokenizer is the checkpoint's dataset's (or
// --vocab FILE), checked against the fingerprint the checkpoint records.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/data/text.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/models/bert_export.hpp"
#include "qnum/models/bert_packed.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/pipeline/bert_run.hpp"
#include "qnum/pipeline/checkpoint.hpp"
#include "qnum/pipeline/datasets.hpp"
#include "qnum/pipeline/registry.hpp"
#include "qnum/train/checkpoint.hpp"

namespace qnum::cli {

/// The `export` subcommand.
class ExportCommand {
 public:
  explicit ExportCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("export", "Write a trained model for other tools: a Hugging Face folder (--to hf) or a packed checkpoint");
    cmd_->add_option("MODEL", model_, "the model the checkpoint holds (a BERT: bert-tiny, bert:L-H-A-I, ...)")
        ->required();
    cmd_->add_option("--load", load_, "the checkpoint (qnum train's best/last, qnum transform's, a lab's best)")
        ->required();
    cmd_->add_option("--to", to_,
                     "what to write: hf (a folder transformers' from_pretrained loads), packed-int8 (every Linear "
                     "W8A8: int8 weight codes; the model quantized to integer width<=8) or packed-mxint8 (lab 4's "
                     "MXINT8 weights); the packed ones write OUT/model.safetensors + model.json, a checkpoint qnum "
                     "test / predict load")
        ->check(CLI::IsMember({"hf", "packed-int8", "packed-mxint8"}))
        ->capture_default_str();
    cmd_->add_option("--output-dir", out_, "the folder to write (refused when it exists, unless --force)")->required();
    cmd_->add_option("--vocab", vocab_,
                     "the vocab.txt the model was trained with (default: its dataset's, as the checkpoint records)");
    cmd_->add_flag("--pack-embeddings", pack_embeddings_,
                   "--to packed-*: the word table packed too, as MXINT8 (lab 4's option; a fifth of bert-base's "
                   "weights)");
    cmd_->add_flag("--force", force_, "replace an existing output folder (atomically)");
  }
  ExportCommand(const ExportCommand&) = delete;
  ExportCommand& operator=(const ExportCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }

  void run() const {
    const auto not_bert = [&] {
      qnum::detail::fail("export --to ", to_, ": model '", model_, "' is not a BERT; ",
                         to_ == "hf" ? "transformers has no model of its kind (the Hugging Face export is for BERT "
                                       "models)"
                                     : "packed models are BERT classifiers");
    };
    if (pipeline::model_spec(model_).input != pipeline::InputKind::tokens) not_bert();
    if (to_ != "hf") {
      export_packed(not_bert);
      return;
    }
    const nlohmann::json meta = train::read_checkpoint_meta(load_);
    const auto tok = pipeline::checkpoint_tokenizer(meta, load_, "export", vocab_, "--vocab");
    const pipeline::Classifier c = pipeline::load_classifier(model_, load_, meta);
    auto* bert = dynamic_cast<models::BertForSequenceClassification*>(c.module.get());
    if (!bert) not_bert();
    models::HfExportOptions o;
    o.replace = force_;
    o.model_max_length = bert->config.max_position_embeddings;
    const std::string dataset = meta.value("dataset", std::string());
    if (pipeline::dataset_input(dataset) == pipeline::InputKind::tokens) o.labels = data::text_dataset_labels();
    const models::HfExportReport r = models::export_hf_bert(*bert, *tok, out_, o);
    const auto& f = r.folded;
    std::printf("export   %s -> %s: Hugging Face folder, %lld tensors (%zu quantized weights, %zu pruned, %zu LoRA "
                "fused, %zu identities)\n",
                load_.c_str(), out_.c_str(), static_cast<long long>(r.tensors), f.quantized_weights.size(),
                f.pruned.size(), f.lora_fused.size(), f.identities.size());
    if (!f.activation_formats.empty())
      std::printf("note     %zu layers quantize activations (e.g. '%s'): transformers computes them in float; "
                  "config.json's qnum_quantization lists their formats\n",
                  f.activation_formats.size(), f.activation_formats.begin().key().c_str());
  }

 private:
  /// --to packed-int8 | packed-mxint8: the checkpoint's model with every Linear packed, saved as
  /// a checkpoint (metadata "packed", byte tensors of codes and scales) into OUT atomically.
  template <class NotBert>
  void export_packed(const NotBert& not_bert) const {
    const nlohmann::json meta = train::read_checkpoint_meta(load_);
    const pipeline::Classifier c = pipeline::load_classifier(model_, load_, meta);
    auto* bert = dynamic_cast<models::BertForSequenceClassification*>(c.module.get());
    if (!bert) not_bert();
    const bool int8 = to_ == "packed-int8";
    const models::PackReport r = int8 ? models::pack_bert_linears_int8(*bert)
                                      : models::pack_bert_linears_mxint8(*bert, Device::cpu());
    std::size_t table_bytes = 0;
    if (pack_embeddings_) table_bytes = models::pack_bert_word_embeddings_mxint8(*bert, Device::cpu()).second;
    models::PackedState state = models::packed_state(*bert);
    nlohmann::json out_meta = meta;
    for (const char* key : {"format", "format_version", "optimizer", "dropout_calls"}) out_meta.erase(key);
    out_meta["structure"] = passes::describe_structure(*bert);
    out_meta["packed"] = std::move(state.meta);
    write_directory_atomic(out_, force_, [&](const std::filesystem::path& tmp) {
      train::save_checkpoint(tmp, "model", *bert, nullptr, out_meta, state.bytes);
    });
    std::printf("export   %s -> %s/model: %zu Linears packed %s, %.2f MiB of weights (fp32 %.2f MiB)%s\n",
                load_.c_str(), out_.c_str(), r.paths.size(), int8 ? "int8 (W8A8)" : "MXINT8",
                static_cast<double>(r.packed_bytes) / (1 << 20), static_cast<double>(r.fp32_weight_bytes) / (1 << 20),
                pack_embeddings_
                    ? (", word table MXINT8 " + std::to_string(table_bytes >> 10) + " KiB").c_str()
                    : "");
  }

  CLI::App* cmd_ = nullptr;
  std::string model_, load_, to_ = "hf", out_, vocab_;
  bool force_ = false, pack_embeddings_ = false;
};

}  // namespace qnum::cli
