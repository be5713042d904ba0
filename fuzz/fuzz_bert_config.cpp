// BERT config.json (models/bert.hpp): parsed from memory (from_json_text, which from_file
// calls) and validated, or refused naming the key.
#include "fuzz_input.hpp"
#include "qnum/models/bert.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  qnum::fuzz::expect_clean([&] {
    const auto c = qnum::models::BertConfig::from_json_text(qnum::fuzz::as_text(data, size), "fuzz-config.json");
    qnum::fuzz::check(c.hidden_size > 0 && c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads == 0,
                      "validated sizes");
  });
  return 0;
}
