// qnum-cuda-memory-study (issue 31 item 3: MASE's lab 4 on a real checkpoint). A Hugging Face
// BERT classifier of BERT-base size — a folder with config.json + model.safetensors (--model),
// or random weights of a preset (--config, default bert-base, seeded) — classifies a batch of
// IMDb reviews (tokenised with qnum's WordPiece from a vocab.txt) twice on the device:
//   mxint8  every Linear's weight (encoder, pooler, classifier) packed as mase-cuda MXINT8
//           (nn::MXInt8PackedLinear, 8.25 bits a weight; forward = DeviceBackend::mxint8_linear,
//           W dequantized to a transient bf16 workspace); embeddings, LayerNorms, biases fp32;
//   fp32    the whole model in float32 (run second: see run()).
// Per variant: the bytes the model holds by kind, the device memory it holds after loading,
// the peak during inference (backend allocations) and the device's used memory (CUDA context
// included), the latency (median of --iters synchronised forwards after --warmup), the
// predicted labels; then whether the labels agree, and the gap to the theoretical saving
// (1 - 8.25/32) explained part by part. --torch-json compares the fp32 labels with PyTorch's
// on the same weights and ids (cuda/bench/torch_gpu.py).
//
// --device cpu runs the same study on the host (no memory figures): a check of the loading,
// packing and report paths on machines without a GPU. --tokenize-only writes the batch's ids
// (--ids-out) and stops: the PyTorch baseline reads that file, so both sides see the same ids.
//
// Exit codes: 0 done; 1 a qnum::Error (message on stderr); 2 bad arguments; 77 no CUDA device.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/cuda/backend.hpp"  // registers the CUDA backend
#include "qnum/data/imdb.hpp"
#include "qnum/data/wordpiece.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/models/bert_hf.hpp"
#include "qnum/models/bert_packed.hpp"
#include "qnum/tensor/device.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using qnum::Device;
using qnum::DeviceBackend;
using qnum::models::BertForSequenceClassification;

constexpr const char* kUsage =
    "usage: qnum-cuda-memory-study [--device cuda|cpu] [--model DIR | --config NAME] [--seed S]\n"
    "         [--vocab vocab.txt] [--texts reviews.tsv[.gz]] [--batch N] [--max-len T] [--warmup N] [--iters N]\n"
    "         [--ids-out ids.json] [--tokenize-only] [--torch-json torch.json] [--json]\n"
    "  --model DIR   a Hugging Face BERT folder (config.json + model.safetensors or pytorch_model.bin)\n"
    "  --config NAME random weights of a preset (bert-tiny ... bert-base, bert:L-H-A-I), HF's init from --seed\n"
    "  --vocab/--texts default to $QNUM_DATA_DIR/bert/vocab.txt and IMDb's test split there\n"
    "  exit codes: 0 done, 1 error, 2 bad arguments, 77 no CUDA device\n";

struct Options {
  Device device = Device::cuda();
  std::string model_dir, config = "bert-base", vocab, texts, ids_out, torch_json;
  std::uint64_t seed = 0;
  std::int64_t batch = 64, max_len = 128;
  int warmup = 2, iters = 10;
  bool json = false, tokenize_only = false;
};

/// The batch both variants (and PyTorch) classify: ids padded to the longest review.
struct TokenBatch {
  std::int64_t batch = 0, seq = 0, real_tokens = 0;
  std::vector<std::int64_t> input_ids, attention_mask, gold;
  std::string texts, vocab;
};

/// Rows alternately of label 0 and label 1, each in file order (IMDb's test TSV lists the
/// negatives first); then whatever is left, in order, if one label runs out.
std::vector<const qnum::data::TextExample*> pick_rows(const qnum::data::TextTable& t, std::int64_t n) {
  std::vector<const qnum::data::TextExample*> by[2], out;
  for (const auto& r : t.rows) by[r.label == 1 ? 1 : 0].push_back(&r);
  std::size_t i[2] = {0, 0};
  for (int turn = 0; static_cast<std::int64_t>(out.size()) < n && (i[0] < by[0].size() || i[1] < by[1].size());
       turn ^= 1) {
    const int k = i[turn] < by[turn].size() ? turn : turn ^ 1;
    out.push_back(by[k][i[k]++]);
  }
  qnum::detail::require(static_cast<std::int64_t>(out.size()) == n, "texts: ", t.source, " has ", t.rows.size(),
                        " reviews, fewer than --batch ", n);
  return out;
}

TokenBatch tokenize(const Options& o) {
  TokenBatch b;
  b.vocab = o.vocab.empty() ? qnum::data::locate_bert_vocab().string() : o.vocab;
  const auto tok = qnum::data::WordPieceTokenizer::from_file(b.vocab);
  qnum::data::TextTable table;
  if (!o.texts.empty()) {
    table = qnum::data::read_imdb_tsv(o.texts);
    b.texts = o.texts;
  } else {
    const auto files = qnum::data::locate_imdb();
    table = qnum::data::read_imdb_files(files).second;
    b.texts = files.test.string();
  }
  const auto rows = pick_rows(table, o.batch);
  qnum::data::EncodeOptions eo;
  eo.max_length = o.max_len;
  std::vector<qnum::data::Encoding> enc;
  for (const auto* r : rows) {
    enc.push_back(tok.encode(r->text, eo));
    b.gold.push_back(r->label);
    b.seq = std::max<std::int64_t>(b.seq, static_cast<std::int64_t>(enc.back().input_ids.size()));
  }
  b.batch = o.batch;
  for (const auto& e : enc) {
    const auto n = static_cast<std::int64_t>(e.input_ids.size());
    b.real_tokens += n;
    for (std::int64_t t = 0; t < b.seq; ++t) {
      b.input_ids.push_back(t < n ? e.input_ids[static_cast<std::size_t>(t)] : tok.pad_id());
      b.attention_mask.push_back(t < n ? 1 : 0);
    }
  }
  return b;
}

json batch_json(const TokenBatch& b) {
  json ids = json::array(), mask = json::array();
  for (std::int64_t r = 0; r < b.batch; ++r) {
    const auto first = b.input_ids.begin() + r * b.seq;
    ids.push_back(std::vector<std::int64_t>(first, first + b.seq));
    const auto m = b.attention_mask.begin() + r * b.seq;
    mask.push_back(std::vector<std::int64_t>(m, m + b.seq));
  }
  return {{"texts", b.texts}, {"vocab", b.vocab},          {"batch", b.batch},
          {"seq", b.seq},     {"real_tokens", b.real_tokens}, {"gold_labels", b.gold},
          {"input_ids", ids}, {"attention_mask", mask}};
}

/// The host model: the folder's config and weights, or a preset with HF's init from the seed.
std::shared_ptr<BertForSequenceClassification> load_model(const Options& o, json* source) {
  if (o.model_dir.empty()) {
    auto m = qnum::models::make_bert_model(o.config, o.seed);
    if (source) *source = {{"kind", "random"}, {"config", o.config}, {"seed", o.seed}};
    return m;
  }
  const fs::path dir(o.model_dir);
  auto c = qnum::models::BertConfig::from_file(dir / "config.json");
  auto m = std::make_shared<BertForSequenceClassification>(c, o.seed);
  fs::path weights = dir / "model.safetensors";
  if (!fs::exists(weights) && fs::exists(dir / "pytorch_model.bin")) weights = dir / "pytorch_model.bin";
  const auto r = qnum::models::load_hf_bert(*m, weights);
  qnum::detail::require(r.missing.empty(), "model ", o.model_dir, ": the checkpoint lacks ", r.missing.size(),
                        " tensors (first: ", r.missing.empty() ? "" : r.missing.front(),
                        "); lab 4 compares a fully given model");
  if (source) *source = {{"kind", "folder"}, {"dir", o.model_dir}, {"tensors", r.loaded}};
  return m;
}

struct Memory {
  std::size_t allocated = 0, peak = 0, used = 0;
};

std::optional<Memory> memory(const Device& d) {
  if (d.is_cpu()) return std::nullopt;
  DeviceBackend& b = qnum::device_backend(d);
  b.synchronize();
  const auto s = b.memory_stats();
  return Memory{s.allocated, s.peak_allocated, s.device_used};
}

struct Variant {
  std::string name;
  qnum::models::WeightBytes bytes;
  std::size_t packed_linears = 0;
  std::optional<Memory> before, loaded, inference, freed;
  std::size_t workspace_estimate = 0;  // the largest mxint8_linear's bf16 W + bf16 x
  std::vector<double> ms;
  std::vector<std::int64_t> labels;
  std::vector<float> logits;  // [batch, num_labels]
  std::int64_t num_labels = 0;
  json config;

  double median_ms() const {
    auto v = ms;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  }
  std::optional<std::size_t> resident() const {
    if (!loaded) return std::nullopt;
    return loaded->allocated - before->allocated;
  }
  std::optional<std::size_t> peak() const {
    if (!inference) return std::nullopt;
    return inference->peak - before->allocated;
  }
};

/// pack_embeddings: the word table packed too (mxint8_embeddings), beyond MASE's lab 4.
Variant run_variant(const Options& o, const TokenBatch& tb, bool packed, json* source, bool pack_embeddings = false) {
  Variant v;
  v.name = !packed ? "fp32" : pack_embeddings ? "mxint8_embeddings" : "mxint8";
  DeviceBackend* backend = o.device.is_cuda() ? &qnum::device_backend(o.device) : nullptr;
  v.before = memory(o.device);
  if (backend) backend->reset_peak();
  auto model = load_model(o, source);
  model->eval();
  v.config = model->config.to_json();
  if (packed) {
    const auto r = qnum::models::pack_bert_linears_mxint8(*model, o.device);
    v.packed_linears = r.paths.size();
    for (auto& [path, m] : model->named_modules())
      if (const auto* p = dynamic_cast<const qnum::nn::MXInt8PackedLinear*>(m))
        v.workspace_estimate = std::max<std::size_t>(
            v.workspace_estimate,
            static_cast<std::size_t>(p->out_features * p->in_features + tb.batch * tb.seq * p->in_features) * 2);
    if (pack_embeddings) qnum::models::pack_bert_word_embeddings_mxint8(*model, o.device);
  }
  v.bytes = qnum::models::bert_weight_bytes(*model);
  if (backend) model->to(o.device);
  v.loaded = memory(o.device);
  if (backend) backend->reset_peak();

  qnum::autograd::NoGradGuard no_grad;
  const qnum::models::BertInput in{tb.batch, tb.seq, tb.input_ids, tb.attention_mask, {}};
  qnum::Tensor logits;
  auto forward = [&] {
    logits = model->forward(in);
    if (backend) backend->synchronize();
  };
  for (int i = 0; i < o.warmup; ++i) forward();
  for (int i = 0; i < o.iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    forward();
    v.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!logits.defined()) forward();
  v.inference = memory(o.device);
  const qnum::Tensor host = logits.is_cuda() ? logits.to(Device::cpu()) : logits;
  v.num_labels = host.shape()[1];
  v.logits.assign(host.values().begin(), host.values().end());
  for (std::int64_t r = 0; r < tb.batch; ++r) {
    const float* row = v.logits.data() + r * v.num_labels;
    v.labels.push_back(std::max_element(row, row + v.num_labels) - row);
  }
  logits = {};
  model.reset();
  v.freed = memory(o.device);
  return v;
}

json bytes_json(const std::optional<std::size_t>& b) { return b ? json(*b) : json(nullptr); }

json variant_json(const Variant& v) {
  const auto& w = v.bytes;
  json j = {{"weight_bytes",
             {{"linear_weights_fp32", w.linear_weights},
              {"linear_weights_packed", w.packed},
              {"linear_biases", w.linear_biases},
              {"embeddings", w.embeddings},
              {"embeddings_packed", w.packed_embeddings},
              {"layer_norms", w.layer_norms},
              {"other", w.other},
              {"total", w.total()}}},
            {"packed_linears", v.packed_linears},
            {"device_resident_bytes", bytes_json(v.resident())},
            {"peak_allocated_bytes", bytes_json(v.peak())},
            {"latency_ms", {{"median", v.median_ms()}, {"iters", v.ms.size()}, {"all", v.ms}}},
            {"labels", v.labels},
            {"logits", v.logits}};
  if (v.loaded) {
    j["activations_and_workspace_bytes"] = v.inference->peak - v.loaded->allocated;
    j["load_peak_bytes"] = v.loaded->peak - v.before->allocated;
    j["device_used_bytes"] = {{"before", v.before->used}, {"loaded", v.loaded->used}, {"after_inference", v.inference->used},
                              {"after_free", v.freed->used}};
    j["leaked_bytes"] = static_cast<std::int64_t>(v.freed->allocated) - static_cast<std::int64_t>(v.before->allocated);
  }
  if (v.workspace_estimate) j["workspace_estimate_bytes"] = v.workspace_estimate;
  return j;
}

double mb(double bytes) { return bytes / (1 << 20); }

std::string mb_or_na(const std::optional<std::size_t>& b) {
  if (!b) return "n/a";
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MB", mb(static_cast<double>(*b)));
  return s;
}

int run(const Options& o) {
  if (!o.tokenize_only && o.device.is_cuda() && !qnum::device_available(o.device)) {
    std::fprintf(stderr, "qnum-cuda-memory-study: qnum::Error: device %s: %s; --device cpu runs the study on the host\n",
                 o.device.str().c_str(),
                 qnum::detail::cuda_backend_slot() == nullptr
                     ? "this program was built without qnum's CUDA backend (qnum/cuda/backend.hpp)"
                     : "no CUDA device visible (driver or GPU missing)");
    return 77;
  }
  const TokenBatch tb = tokenize(o);
  if (!o.ids_out.empty()) {
    std::ofstream f(o.ids_out);
    f << batch_json(tb).dump() << "\n";
    qnum::detail::require(f.good(), "--ids-out ", o.ids_out, ": cannot write");
  }
  if (o.tokenize_only) {
    std::printf("tokenized %lld reviews to %lld x %lld ids (%lld real tokens)%s%s\n", static_cast<long long>(tb.batch),
                static_cast<long long>(tb.batch), static_cast<long long>(tb.seq),
                static_cast<long long>(tb.real_tokens), o.ids_out.empty() ? "" : " -> ", o.ids_out.c_str());
    return 0;
  }
  const std::string device_name = o.device.is_cuda() ? qnum::device_backend(o.device).name() : "cpu";
  json source;
  // MXINT8 first: an allocator that keeps freed memory cached would otherwise carry the fp32
  // run's larger footprint into the MXINT8 run's device_used. (The fp32 run needs more of
  // everything, so what MXINT8 leaves cached does not inflate it.)
  const Variant c = run_variant(o, tb, true, nullptr, true);
  const Variant b = run_variant(o, tb, true, &source);
  const Variant a = run_variant(o, tb, false, nullptr);
  std::int64_t agree_c = 0;
  for (std::int64_t r = 0; r < tb.batch; ++r)
    agree_c += a.labels[static_cast<std::size_t>(r)] == c.labels[static_cast<std::size_t>(r)];

  std::int64_t agree = 0;
  double max_diff = 0;
  for (std::int64_t r = 0; r < tb.batch; ++r) agree += a.labels[static_cast<std::size_t>(r)] == b.labels[static_cast<std::size_t>(r)];
  for (std::size_t i = 0; i < a.logits.size(); ++i) max_diff = std::max(max_diff, double(std::abs(a.logits[i] - b.logits[i])));
  std::int64_t gold_a = 0, gold_b = 0;
  for (std::int64_t r = 0; r < tb.batch; ++r) {
    gold_a += a.labels[static_cast<std::size_t>(r)] == tb.gold[static_cast<std::size_t>(r)];
    gold_b += b.labels[static_cast<std::size_t>(r)] == tb.gold[static_cast<std::size_t>(r)];
  }

  const double theory = 1.0 - 8.25 / 32.0;
  const auto& wa = a.bytes;
  const auto& wb = b.bytes;
  json gap = {
      {"theory", theory},
      {"linear_weights", 1.0 - double(wb.packed) / double(wa.linear_weights)},
      {"all_weights", 1.0 - double(wb.total()) / double(wa.total())},
      {"explained",
       {{"embeddings_fp32_bytes", wb.embeddings},
        {"layer_norms_fp32_bytes", wb.layer_norms},
        {"linear_biases_fp32_bytes", wb.linear_biases},
        {"saving_if_all_weights_packed",
         1.0 - (double(wb.packed) + 8.25 / 32.0 * double(wb.embeddings + wb.layer_norms + wb.linear_biases)) /
                   double(wa.total())}}}};
  if (a.loaded) {
    const double pa = double(*a.peak()), pb = double(*b.peak());
    gap["peak_allocated"] = 1.0 - pb / pa;
    gap["device_used"] = 1.0 - double(b.inference->used) / double(a.inference->used);
    gap["explained"]["activations_and_workspace_fp32_bytes"] = a.inference->peak - a.loaded->allocated;
    gap["explained"]["activations_and_workspace_mxint8_bytes"] = b.inference->peak - b.loaded->allocated;
    gap["explained"]["workspace_estimate_bytes"] = b.workspace_estimate;
    // What the device holds besides this program's live allocations: the CUDA context, cuBLAS
    // handles and workspaces, the allocator's cache, other processes.
    gap["explained"]["context_and_other_bytes"] = b.before->used - b.before->allocated;
  }
  json out = {{"program", "qnum-cuda-memory-study"},
              {"device", device_name},
              {"model", source},
              {"config", a.config},
              {"batch", {{"batch", tb.batch}, {"seq", tb.seq}, {"real_tokens", tb.real_tokens}, {"texts", tb.texts}, {"vocab", tb.vocab}}},
              {"variants", {{"fp32", variant_json(a)}, {"mxint8", variant_json(b)}, {"mxint8_embeddings", variant_json(c)}}},
              {"labels_identical_mxint8_embeddings", agree_c == tb.batch},
              {"mxint8_embeddings_weight_ratio", double(c.bytes.total()) / double(wa.total())},
              {"mxint8_embeddings_peak_allocated_ratio",
               a.loaded ? json(double(*c.peak()) / double(*a.peak())) : json(nullptr)},
              {"labels_identical", agree == tb.batch},
              {"label_agreement", agree},
              {"max_abs_logit_diff", max_diff},
              {"gold_accuracy", {{"fp32", double(gold_a) / double(tb.batch)}, {"mxint8", double(gold_b) / double(tb.batch)}}},
              {"mxint8_weight_ratio", double(wb.total()) / double(wa.total())},
              {"mxint8_linear_weight_ratio", double(wb.packed) / double(wa.linear_weights)},
              {"weight_ratio_target", 0.35},
              {"gap", gap}};

  if (!o.torch_json.empty()) {
    std::ifstream f(o.torch_json);
    qnum::detail::require(f.good(), "--torch-json ", o.torch_json, ": cannot read");
    const json t = json::parse(f);
    const auto tl = t.at("labels").get<std::vector<std::int64_t>>();
    qnum::detail::require(tl.size() == a.labels.size(), "--torch-json: ", tl.size(), " labels for a batch of ",
                          a.labels.size());
    double tdiff = 0;
    if (t.contains("logits")) {
      std::vector<float> flat;
      for (const auto& row : t["logits"]) for (const auto& x : row) flat.push_back(x.get<float>());
      if (flat.size() == a.logits.size())
        for (std::size_t i = 0; i < flat.size(); ++i) tdiff = std::max(tdiff, double(std::abs(flat[i] - a.logits[i])));
    }
    out["torch"] = {{"labels_identical_fp32", tl == a.labels},
                    {"labels_identical_mxint8", tl == b.labels},
                    {"max_abs_logit_diff_fp32", tdiff}};
  }

  if (o.json) {
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("lab 4 on %s: %s, batch %lld x %lld (%lld real tokens)\n", device_name.c_str(), source.dump().c_str(),
              static_cast<long long>(tb.batch), static_cast<long long>(tb.seq), static_cast<long long>(tb.real_tokens));
  for (const Variant* v : {&a, &b, &c}) {
    const auto& w = v->bytes;
    std::printf("%-6s weights %.1f MB (Linear %.1f MB%s, biases %.1f, embeddings %.1f, LayerNorms %.2f); resident %s, "
                "peak %s; %.2f ms median of %zu\n",
                v->name.c_str(), mb(double(w.total())), mb(double(w.linear_weights + w.packed)),
                w.packed ? " packed" : " fp32", mb(double(w.linear_biases)), mb(double(w.embeddings)),
                mb(double(w.layer_norms)), mb_or_na(v->resident()).c_str(), mb_or_na(v->peak()).c_str(), v->median_ms(),
                v->ms.size());
  }
  std::printf("labels identical: %s (%lld/%lld agree; max |logit diff| %.3g); gold accuracy fp32 %.3f, mxint8 %.3f\n",
              agree == tb.batch ? "yes" : "NO", static_cast<long long>(agree), static_cast<long long>(tb.batch), max_diff,
              double(gold_a) / double(tb.batch), double(gold_b) / double(tb.batch));
  std::printf("weight bytes MXINT8/fp32: Linears packed %.3f, Linears + word table packed %.3f (target <= 0.35; labels "
              "identical: %s), Linear weights alone %.3f (8.25/32 = %.3f)\n",
              double(wb.total()) / double(wa.total()), double(c.bytes.total()) / double(wa.total()),
              agree_c == tb.batch ? "yes" : "NO", double(wb.packed) / double(wa.linear_weights), 8.25 / 32);
  std::printf("saving: theory %.1f%%, all weights %.1f%%", 100 * theory, 100 * gap["all_weights"].get<double>());
  if (a.loaded)
    std::printf(", peak allocated %.1f%% (activations+workspace fp32 %.1f MB, mxint8 %.1f MB, of which bf16 workspace "
                "<= %.1f MB), device used %.1f%% (context and other %.1f MB)",
                100 * gap["peak_allocated"].get<double>(), mb(double(a.inference->peak - a.loaded->allocated)),
                mb(double(b.inference->peak - b.loaded->allocated)), mb(double(b.workspace_estimate)),
                100 * gap["device_used"].get<double>(), mb(double(b.before->used - b.before->allocated)));
  std::printf("\n");
  if (out.contains("torch"))
    std::printf("PyTorch fp32 labels identical: %s (max |logit diff| %.3g); vs MXINT8: %s\n",
                out["torch"]["labels_identical_fp32"].get<bool>() ? "yes" : "NO",
                out["torch"]["max_abs_logit_diff_fp32"].get<double>(),
                out["torch"]["labels_identical_mxint8"].get<bool>() ? "yes" : "NO");
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    auto num = [&](auto& field) {
      char* end = nullptr;
      const long long v = std::strtoll(argv[++i], &end, 10);
      if (end == argv[i] || *end || v < 0) throw std::invalid_argument(a + " needs a non-negative integer");
      field = static_cast<std::remove_reference_t<decltype(field)>>(v);
    };
    if (a == "--json")
      o.json = true;
    else if (a == "--tokenize-only")
      o.tokenize_only = true;
    else if (a == "--device" && has) {
      try {
        o.device = Device::parse(argv[++i]);
      } catch (const qnum::Error& e) {
        throw std::invalid_argument(e.what());
      }
    }
    else if (a == "--model" && has)
      o.model_dir = argv[++i];
    else if (a == "--config" && has)
      o.config = argv[++i];
    else if (a == "--vocab" && has)
      o.vocab = argv[++i];
    else if (a == "--texts" && has)
      o.texts = argv[++i];
    else if (a == "--ids-out" && has)
      o.ids_out = argv[++i];
    else if (a == "--torch-json" && has)
      o.torch_json = argv[++i];
    else if (a == "--seed" && has)
      num(o.seed);
    else if (a == "--batch" && has)
      num(o.batch);
    else if (a == "--max-len" && has)
      num(o.max_len);
    else if (a == "--warmup" && has)
      num(o.warmup);
    else if (a == "--iters" && has)
      num(o.iters);
    else {
      std::fprintf(stderr, "qnum-cuda-memory-study: unknown or incomplete argument '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (o.batch < 1 || o.max_len < 2) {
    std::fprintf(stderr, "qnum-cuda-memory-study: --batch must be >= 1 and --max-len >= 2\n%s", kUsage);
    return 2;
  }
  return run(o);
} catch (const std::invalid_argument& e) {
  std::fprintf(stderr, "qnum-cuda-memory-study: %s\n%s", e.what(), kUsage);
  return 2;
} catch (const qnum::Error& e) {
  std::fprintf(stderr, "qnum-cuda-memory-study: qnum::Error: %s\n", e.what());
  return 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "qnum-cuda-memory-study: %s\n", e.what());
  return 1;
}
