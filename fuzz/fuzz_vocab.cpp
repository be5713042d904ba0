// vocab.txt (data/wordpiece.hpp): the input up to the first NUL is the vocabulary (read from
// memory by from_text, which from_file calls), the rest a text to tokenize and encode. Ids
// stay inside the vocabulary; encodings have the length asked.
#include <cstring>

#include "fuzz_input.hpp"
#include "qnum/data/wordpiece.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* nul = static_cast<const std::uint8_t*>(std::memchr(data, 0, size));
  const std::size_t vocab_size = nul ? static_cast<std::size_t>(nul - data) : size;
  const auto text = nul ? qnum::fuzz::as_text(nul + 1, size - vocab_size - 1) : std::string_view();
  qnum::fuzz::expect_clean([&] {
    const auto tok =
        qnum::data::WordPieceTokenizer::from_text(qnum::fuzz::as_text(data, vocab_size), {}, "fuzz-vocab.txt");
    for (const auto id : tok.ids(text)) qnum::fuzz::check(id >= 0 && id < tok.vocab_size(), "id inside vocabulary");
    qnum::data::EncodeOptions o;
    o.max_length = 16;
    const auto e = tok.encode(text, o);
    qnum::fuzz::check(e.input_ids.size() <= 16 && e.attention_mask.size() == e.input_ids.size(),
                      "encoding within max_length");
  });
  return 0;
}
