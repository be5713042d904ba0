// Checkpoint metadata JSON (train/checkpoint.hpp): the input replaces the "qnum.meta" string
// of a valid jsc-tiny checkpoint, serialised and parsed back in memory (safetensors_bytes,
// parse_safetensors: what read_safetensors does after reading the file); loading it into a
// model and Adam (load_checkpoint_state, the part of load_checkpoint after the file is read),
// reading the metadata (embedded_meta, as read_checkpoint_meta) and restoring its "structure"
// (passes/structure.hpp) onto a fresh model succeed or are refused.
#include <filesystem>

#include "fuzz_input.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/train/checkpoint.hpp"
#include "qnum/train/trainer.hpp"

namespace {
// The tensors of a valid checkpoint, written once by save_checkpoint (then only in memory).
std::map<std::string, qnum::Tensor> checkpoint_tensors() {
  const auto dir = qnum::fuzz::scratch_dir() / ("qnum-fuzz-ckpt-" + std::to_string(::getpid()));
  auto model = qnum::models::make_jsc_model("jsc-tiny");
  auto opt = qnum::train::make_optimizer("adam", model->parameters(), 1e-3, 0.0);
  auto tensors = qnum::read_safetensors(qnum::train::save_checkpoint(dir, "seed", *model, opt.get(), {})).tensors;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return tensors;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto tensors = checkpoint_tensors();
  const std::string what = "checkpoint 'fuzz.safetensors'";
  std::string bytes;
  try {  // metadata that is not UTF-8 cannot be stored in a safetensors (JSON) header
    bytes = qnum::safetensors_bytes(tensors, {{qnum::train::kMetaKey, std::string(qnum::fuzz::as_text(data, size))}});
  } catch (const qnum::Error&) {
    return 0;
  }
  const auto st = qnum::parse_safetensors(bytes, what);
  qnum::fuzz::expect_clean([&] {
    auto model = qnum::models::make_jsc_model("jsc-tiny");
    auto opt = qnum::train::make_optimizer("adam", model->parameters(), 1e-3, 0.0);
    const auto meta = qnum::train::detail::embedded_meta(st, what).value_or(nlohmann::json::object());
    qnum::train::load_checkpoint_state(st, meta, what, *model, opt.get());
  });
  qnum::fuzz::expect_clean([&] {
    const auto meta = qnum::train::detail::embedded_meta(st, what).value_or(nlohmann::json::object());
    if (meta.contains("structure")) {
      auto model = qnum::models::make_jsc_model("jsc-tiny");
      qnum::passes::restore_structure(*model, meta["structure"]);
    }
  });
  return 0;
}
