// A qnum BERT as a Hugging Face folder that transformers loads with
// AutoModelForSequenceClassification / AutoTokenizer.from_pretrained: config.json,
// model.safetensors under transformers' names (the state dict names are already theirs),
// vocab.txt, tokenizer_config.json and special_tokens_map.json. The weights are the values
// qnum's forward uses (passes/materialise.hpp): quantized, masked, LoRA folded in; a Linear that
// NAS made an Identity is written as the identity matrix with a zero bias. The formats are
// recorded in config.json's "qnum_quantization" (not "quantization_config": transformers
// warns on a quant_method it does not know, and it has nothing to apply): what transformers
// computes in float (activation formats) is listed there, since it does not apply them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/data/wordpiece.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/safetensors.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/passes/materialise.hpp"

namespace qnum::models {

struct HfExportOptions {
  std::vector<std::string> labels;  ///< class names (id2label); empty: LABEL_i
  std::int64_t model_max_length = 512;
  bool replace = false;  ///< replace an existing folder
};

/// What export_hf_bert wrote and folded.
struct HfExportReport {
  passes::MaterialiseReport folded;
  std::int64_t tensors = 0;
};

/// config.json of the export: the model's config, the class names, and the formats.
inline nlohmann::json hf_export_config(const BertConfig& c, const HfExportOptions& o,
                                       const passes::MaterialiseReport& r) {
  nlohmann::json j = c.to_json();
  j["dtype"] = "float32";
  if (!o.labels.empty()) {
    qnum::detail::require(static_cast<std::int64_t>(o.labels.size()) == c.num_labels, "export: ", o.labels.size(),
                          " class names for a model of ", c.num_labels, " labels");
    nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
    for (std::size_t i = 0; i < o.labels.size(); ++i) {
      id2label[std::to_string(i)] = o.labels[i];
      label2id[o.labels[i]] = i;
    }
    j["id2label"] = id2label;
    j["label2id"] = label2id;
  }
  if (!r.formats.empty() || !r.pruned.empty() || !r.lora_fused.empty() || !r.identities.empty())
    j["qnum_quantization"] = {{"quant_method", "qnum"},
                                {"weights_materialised", true},
                                {"layers", r.formats},
                                {"activations_not_applied", r.activation_formats},
                                {"pruned", r.pruned},
                                {"lora_fused", r.lora_fused},
                                {"identity", r.identities}};
  return j;
}

/// Writes `model` and `tokenizer` as a Hugging Face folder `dir` (see the file comment),
/// atomically: an existing folder is refused unless o.replace.
inline HfExportReport export_hf_bert(BertForSequenceClassification& model, const data::WordPieceTokenizer& tokenizer,
                                     const std::filesystem::path& dir, const HfExportOptions& o = {}) {
  const BertConfig& c = model.config;
  qnum::detail::require(tokenizer.vocab_size() == c.vocab_size, "export: the tokenizer has ", tokenizer.vocab_size(),
                        " tokens but the model's vocab_size is ", c.vocab_size, " (is it the vocabulary it was trained with?)");
  HfExportReport report;
  std::map<std::string, Tensor> state = passes::materialised_state(model, &report.folded);
  for (const auto& path : report.folded.identities) {  // NAS's identity: x·I + 0 = x in float
    qnum::detail::require(path.starts_with("bert.encoder.layer.") || path == "bert.pooler.dense", "export: layer '",
                          path, "' is an Identity, which transformers' BERT has no place for");
    Tensor w = Tensor::zeros({c.hidden_size, c.hidden_size});
    for (std::int64_t i = 0; i < c.hidden_size; ++i) w.data()[i * c.hidden_size + i] = 1.0f;
    state[path + ".weight"] = w;
    state[path + ".bias"] = Tensor::zeros({c.hidden_size});
  }
  report.tensors = static_cast<std::int64_t>(state.size());
  nlohmann::json config = hf_export_config(c, o, report.folded);
  config["pad_token_id"] = tokenizer.pad_id();

  std::string vocab;
  for (std::int64_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const std::string& t = tokenizer.token(id);
    qnum::detail::require(t.find_first_of("\n\r") == std::string::npos, "export: vocabulary token ", id,
                          " holds a line break; vocab.txt cannot store it");
    vocab += t + "\n";
  }
  const data::WordPieceOptions& to = tokenizer.options();
  // [CLS], [SEP], [UNK] and [PAD] every WordPieceTokenizer has; [MASK] only some vocabularies.
  nlohmann::json specials{{"unk_token", "[UNK]"}, {"sep_token", "[SEP]"}, {"pad_token", "[PAD]"},
                          {"cls_token", "[CLS]"}};
  if (tokenizer.mask_id() >= 0) specials["mask_token"] = "[MASK]";
  nlohmann::json tok_config = specials;
  tok_config["tokenizer_class"] = "BertTokenizer";
  tok_config["do_lower_case"] = to.lower_case;
  tok_config["strip_accents"] = to.strip_accents ? nlohmann::json(*to.strip_accents) : nlohmann::json(nullptr);
  tok_config["tokenize_chinese_chars"] = to.tokenize_chinese_chars;
  tok_config["model_max_length"] = o.model_max_length;
  tok_config["clean_up_tokenization_spaces"] = false;

  write_directory_atomic(dir, o.replace, [&](const std::filesystem::path& tmp) {
    write_file_atomic(tmp / "config.json", config.dump(2) + "\n");
    write_safetensors(tmp / "model.safetensors", state, {{"format", "pt"}});
    write_file_atomic(tmp / "vocab.txt", vocab);
    write_file_atomic(tmp / "tokenizer_config.json", tok_config.dump(2) + "\n");
    write_file_atomic(tmp / "special_tokens_map.json", specials.dump(2) + "\n");
  });
  return report;
}

}  // namespace qnum::models
