// Checkpoint metadata JSON (train/checkpoint.hpp): the input replaces the "qnum.meta" string
// of a valid jsc-tiny checkpoint; loading it into a model and Adam, reading the metadata and
// restoring its "structure" (passes/structure.hpp) onto a fresh model succeed or are refused.
#include <filesystem>

#include "fuzz_input.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/passes/structure.hpp"
#include "qnum/train/checkpoint.hpp"
#include "qnum/train/trainer.hpp"

namespace {
struct Checkpoint {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("qnum-fuzz-ckpt-" + std::to_string(::getpid()));
  std::map<std::string, qnum::Tensor> tensors;
  Checkpoint() {
    auto model = qnum::models::make_jsc_model("jsc-tiny");
    auto opt = qnum::train::make_optimizer("adam", model->parameters(), 1e-3, 0.0);
    tensors = qnum::read_safetensors(qnum::train::save_checkpoint(dir, "seed", *model, opt.get(), {})).tensors;
  }
  ~Checkpoint() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Checkpoint ck;
  const auto path = ck.dir / "fuzz.safetensors";
  try {  // metadata that is not UTF-8 cannot be stored in a safetensors (JSON) header
    qnum::write_safetensors(path, ck.tensors, {{qnum::train::kMetaKey, std::string(qnum::fuzz::as_text(data, size))}});
  } catch (const qnum::Error&) {
    return 0;
  }
  qnum::fuzz::expect_clean([&] {
    auto model = qnum::models::make_jsc_model("jsc-tiny");
    auto opt = qnum::train::make_optimizer("adam", model->parameters(), 1e-3, 0.0);
    qnum::train::load_checkpoint(path, *model, opt.get());
  });
  qnum::fuzz::expect_clean([&] {
    const auto meta = qnum::train::read_checkpoint_meta(path);
    if (meta.contains("structure")) {
      auto model = qnum::models::make_jsc_model("jsc-tiny");
      qnum::passes::restore_structure(*model, meta["structure"]);
    }
  });
  return 0;
}
