// Transform/quantize pass configs (`qnum transform --config`, apps/cli/transform_command.hpp):
// the first byte picks TOML or JSON; the text is read from memory as the CLI reads a file
// (config_text_as_json, which toml_file_as_json calls), and its [passes] (quantize, prune,
// lora) are applied to a jsc-tiny model with calibration data — applied, or refused naming
// the key.
#include "cli/transform_command.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  // Non-ASCII input included: io/toml_guard.hpp keeps it from toml++ 3.3.0's undefined
  // behaviour (marzer/tomlplusplus#295).
  static const qnum::Tensor calibration = [] {
    std::vector<float> v(8 * qnum::data::kJscFeatures);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 11) * 0.3f - 1.5f;
    return qnum::Tensor({8, qnum::data::kJscFeatures}, std::move(v));
  }();
  qnum::fuzz::expect_clean([&] {
    const bool json = data[0] & 1;
    const auto cfg = qnum::io::config_text_as_json(qnum::fuzz::as_text(data + 1, size - 1),
                                                            json ? "fuzz-passes.json" : "fuzz-passes.toml", json);
    const auto passes_cfg = cfg.contains("passes") ? cfg["passes"] : cfg;
    qnum::io::require_keys(passes_cfg, "passes", {"quantize", "prune", "lora"});
    nlohmann::json pipeline = nlohmann::json::object();
    for (const char* k : {"quantize", "prune"})
      if (passes_cfg.contains(k)) pipeline[k] = passes_cfg[k];
    auto model = qnum::models::make_jsc_model("jsc-tiny");
    qnum::passes::compress(*model, pipeline, {calibration});
    if (passes_cfg.contains("lora"))
      qnum::passes::insert_lora(*model, qnum::passes::parse_lora_config(passes_cfg["lora"]));
    (void)(*model)(calibration);
  });
  return 0;
}
