// models/bert_export.hpp and passes/materialise.hpp: an exported folder, loaded into a plain
// float BERT (as transformers would load it), computes what the quantized, pruned, LoRA-adapted
// model with a NAS identity computed; the folder's files; refusals. transformers itself loads
// exported folders in CTest export.hf.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/io/atomic_file.hpp"
#include "qnum/models/bert_export.hpp"
#include "qnum/models/bert_hf.hpp"
#include "qnum/models/bert_surgery.hpp"
#include "qnum/passes/lora.hpp"
#include "qnum/passes/prune.hpp"

using namespace qnum;

namespace {

models::BertConfig small() {
  models::BertConfig c = models::bert_config("bert-tiny");
  c.vocab_size = 40;
  c.hidden_size = 16;
  c.intermediate_size = 32;
  c.max_position_embeddings = 16;
  return c;
}

data::WordPieceTokenizer vocab40() {
  std::vector<std::string> t{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  while (t.size() < 40) t.push_back("w" + std::to_string(t.size()));
  return data::WordPieceTokenizer(t, data::WordPieceOptions{}, "test vocabulary");
}

Tensor ids(std::int64_t b, std::int64_t t) {
  std::vector<float> v(static_cast<std::size_t>(b * t));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7 + 3) % 40);
  return Tensor({b, t}, std::move(v));
}

struct TempDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() / ("qnum-export-" + std::to_string(::getpid()));
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST_CASE("bert.export: the exported weights in a float BERT compute the transformed model's logits") {
  const auto cfg = small();
  models::BertForSequenceClassification m(cfg, 5);
  const std::string q = "bert.encoder.layer.0.attention.self.query";
  const std::string fmt = "integer:width=8,frac_width=6";
  for (auto& [path, lin] : passes::linear_layers(m)) {
    nn::QuantConfig qc;
    qc.weight = Format::parse(fmt);
    qc.bias = Format::parse("integer:width=8,frac_width=5");
    lin->set_quant(qc);
  }
  auto* value = dynamic_cast<nn::Linear*>(&m.at("bert.encoder.layer.1.attention.self.value"));
  std::vector<float> mask(static_cast<std::size_t>(value->weight.numel()), 1.0f);
  for (std::size_t i = 0; i < mask.size(); i += 3) mask[i] = 0.0f;
  value->set_weight_mask(mask);
  auto* query = dynamic_cast<nn::Linear*>(&m.at(q));
  passes::attach_lora(*query, 2, 0.5f, 0.0, 11);
  for (auto& b : query->lora_B->weight.values()) b = 0.25f;  // a trained adapter, not the zero start
  models::replace_with_identity(m, "bert.encoder.layer.1.attention.output.dense");
  m.eval();
  const Tensor x = ids(2, 6);
  const Tensor y0 = m.forward(x);

  TempDir dir;
  models::HfExportOptions o;
  o.labels = {"negative", "positive"};
  const auto report = models::export_hf_bert(m, vocab40(), dir.path, o);
  CHECK(report.folded.lora_fused == std::vector<std::string>{q});
  CHECK(report.folded.pruned == std::vector<std::string>{"bert.encoder.layer.1.attention.self.value"});
  CHECK(report.folded.identities == std::vector<std::string>{"bert.encoder.layer.1.attention.output.dense"});
  CHECK(report.folded.activation_formats.empty());
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
                        "special_tokens_map.json"})
    CHECK(std::filesystem::is_regular_file(dir.path / f));

  models::BertForSequenceClassification plain(models::BertConfig::from_file(dir.path / "config.json"), 99);
  const auto loaded = models::load_hf_bert(plain, dir.path / "model.safetensors");
  CHECK(loaded.missing.empty());
  CHECK(loaded.ignored.empty());  // no masks or adapters left
  plain.eval();
  const Tensor y1 = plain.forward(x);
  REQUIRE(y1.numel() == y0.numel());
  for (std::int64_t i = 0; i < y0.numel(); ++i) CHECK(std::abs(y1.data()[i] - y0.data()[i]) <= 1e-5f);

  // The base weights on the format's grid (the query's with its adapter folded in is not).
  const auto st = read_safetensors(dir.path / "model.safetensors");
  for (float w : st.tensors.at("bert.encoder.layer.0.attention.self.key.weight").values())
    CHECK(w * 64.0f == std::round(w * 64.0f));
  int zeros = 0;
  for (float w : st.tensors.at("bert.encoder.layer.1.attention.self.value.weight").values()) zeros += w == 0.0f;
  CHECK(zeros >= static_cast<int>(mask.size() / 3));
  const auto config = nlohmann::json::parse(read_file(dir.path / "config.json"));
  CHECK(config["id2label"]["1"] == "positive");
  CHECK(config["qnum_quantization"]["layers"]["bert.encoder.layer.0.attention.self.key"]["weight"] == fmt);
  CHECK(read_file(dir.path / "vocab.txt").starts_with("[PAD]\n[UNK]\n[CLS]\n"));

  // An existing folder: refused, untouched; replaced with `replace`.
  const std::string before = read_file(dir.path / "model.safetensors");
  CHECK_THROWS_WITH_AS(models::export_hf_bert(plain, vocab40(), dir.path, {}), doctest::Contains("--force"),
                       qnum::Error);
  CHECK(read_file(dir.path / "model.safetensors") == before);
  models::HfExportOptions replace;
  replace.replace = true;
  models::BertForSequenceClassification other(cfg, 77);
  models::export_hf_bert(other, vocab40(), dir.path, replace);
  CHECK(read_file(dir.path / "model.safetensors") != before);
}

TEST_CASE("bert.export: refusals name the problem") {
  TempDir dir;
  models::BertForSequenceClassification m(small(), 1);
  std::vector<std::string> t{"[PAD]", "[UNK]", "[CLS]", "[SEP]"};
  CHECK_THROWS_WITH_AS(models::export_hf_bert(m, data::WordPieceTokenizer(t, {}, "v"), dir.path),
                       doctest::Contains("vocab_size is 40"), qnum::Error);
  auto* lin = dynamic_cast<nn::Linear*>(&m.at("bert.encoder.layer.0.attention.self.key"));
  passes::PruneSpec spec;
  spec.sparsity = 0.5;
  lin->input_transform = std::make_shared<passes::ActivationPruner>(spec, 1, 0.0f);
  CHECK_THROWS_WITH_AS(models::export_hf_bert(m, vocab40(), dir.path), doctest::Contains("prunes its activations"),
                       qnum::Error);
  CHECK(!std::filesystem::exists(dir.path));  // nothing written
}
