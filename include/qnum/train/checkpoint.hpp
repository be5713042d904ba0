// Training checkpoints: a model's state_dict and its optimizer's state in one safetensors
// file plus the run's metadata as JSON beside it.
//
//   <dir>/<stem>.safetensors  model tensors under their state_dict names, optimizer state
//                             under "optimizer.<key>", and the metadata again (as JSON text
//                             under the "qnum.meta" key of __metadata__), so the tensor file
//                             alone is a complete, self-consistent checkpoint
//   <dir>/<stem>.json         the metadata for people and tools: the caller's fields (model
//                             name, epoch, metrics, config, ...) plus "format",
//                             "format_version", "optimizer" (its type) and "dropout_calls"
//
// Both files are written atomically (temp file + rename), so an interrupted save leaves the
// previous checkpoint readable. Dropout layers' mask counters are saved and restored so a
// resumed run draws the same masks as an uninterrupted one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/json.hpp"
#include "qnum/io/safetensors.hpp"
#include "qnum/nn/nn.hpp"

namespace qnum::train {

/// The "format" field of every checkpoint's metadata.
inline constexpr const char* kCheckpointFormat = "qnum-checkpoint";
/// The layout version written by save_checkpoint (load_checkpoint accepts <= this).
inline constexpr int kCheckpointFormatVersion = 1;
/// The prefix of optimizer state keys in the tensor file.
inline constexpr const char* kOptimizerPrefix = "optimizer.";
/// The __metadata__ key that carries the metadata JSON inside the safetensors file.
inline constexpr const char* kMetaKey = "qnum.meta";

namespace detail {

/// The mask counter of every Dropout layer by module name.
inline nlohmann::json dropout_calls(const nn::Module& model) {
  nlohmann::json out = nlohmann::json::object();
  // named_modules() is non-const only because it hands out mutable pointers.
  for (auto& [name, m] : const_cast<nn::Module&>(model).named_modules())
    if (auto* d = dynamic_cast<nn::Dropout*>(m)) out[name] = d->calls();
  return out;
}

/// Sets the Dropout counters from `calls` (as written by dropout_calls); a counter for a
/// module that is not a Dropout of `model` is an error.
inline void restore_dropout_calls(nn::Module& model, const nlohmann::json& calls) {
  if (!calls.is_object()) return;
  std::map<std::string, nn::Dropout*> drops;
  for (auto& [name, m] : model.named_modules())
    if (auto* d = dynamic_cast<nn::Dropout*>(m)) drops[name] = d;
  for (auto& [name, n] : calls.items())
    qnum::detail::require(drops.count(name) == 1 && n.is_number_unsigned(), "dropout counter '", name,
                          "' does not match a Dropout layer of the model");
  for (auto& [name, n] : calls.items()) drops[name]->set_calls(n.get<std::uint64_t>());
}

/// `path` as the checkpoint's tensor file: "x.safetensors" as is, "x.json" or a bare stem
/// "x" become "x.safetensors".
inline std::filesystem::path tensor_file(const std::filesystem::path& path) {
  std::filesystem::path p = path;
  if (p.extension() == ".safetensors") return p;
  if (p.extension() == ".json") return p.replace_extension(".safetensors");
  return std::filesystem::path(p.string() + ".safetensors");
}

}  // namespace detail

/// Writes `<dir>/<stem>.safetensors` and `<dir>/<stem>.json` (see the file comment), creating
/// `dir` if needed. `opt` may be null (no optimizer state saved). `meta` must be a JSON
/// object; save_checkpoint adds format, format_version, optimizer and dropout_calls to it.
/// `bytes`: byte tensors (a packed model's codes, models::packed_state) written beside them.
/// Returns the path of the tensor file.
inline std::filesystem::path save_checkpoint(const std::filesystem::path& dir, const std::string& stem,
                                             const nn::Module& model, const nn::Optimizer* opt,
                                             const nlohmann::json& meta,
                                             const std::map<std::string, ByteTensor>& bytes = {}) {
  qnum::detail::require(meta.is_object() || meta.is_null(), "save_checkpoint: meta must be a JSON object");
  qnum::detail::require(!stem.empty(), "save_checkpoint: empty checkpoint name");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  qnum::detail::require(!ec, "save_checkpoint: cannot create directory '", dir.string(), "': ", ec.message());

  std::map<std::string, Tensor> tensors = model.state_dict();
  for (const auto& [name, t] : tensors)
    qnum::detail::require(name.rfind(kOptimizerPrefix, 0) != 0, "save_checkpoint: model tensor '", name,
                          "' collides with the optimizer prefix '", kOptimizerPrefix, "'");
  if (opt)
    for (auto& [key, t] : opt->state_dict()) tensors.emplace(kOptimizerPrefix + key, t);

  nlohmann::json full = meta.is_null() ? nlohmann::json::object() : meta;
  full["format"] = kCheckpointFormat;
  full["format_version"] = kCheckpointFormatVersion;
  full["optimizer"] = opt ? nlohmann::json(opt->type_name()) : nlohmann::json(nullptr);
  full["dropout_calls"] = detail::dropout_calls(model);
  const std::string text = full.dump(2);

  const auto tensor_path = dir / (stem + ".safetensors");
  write_safetensors(tensor_path, tensors, {{kMetaKey, full.dump()}}, bytes);
  write_file_atomic(dir / (stem + ".json"), text + "\n");
  return tensor_path;
}

namespace detail {
/// The "qnum.meta" entry of a checkpoint's tensors file as a JSON object; nullopt when absent.
inline std::optional<nlohmann::json> embedded_meta(const SafetensorsFile& st, const std::string& what) {
  const auto it = st.metadata.find(kMetaKey);
  if (it == st.metadata.end()) return std::nullopt;
  auto meta = io::parse_json(it->second, what + ": metadata", false);
  qnum::detail::require(meta.is_object(), what, ": metadata '", kMetaKey, "' is not a JSON object");
  return meta;
}
}  // namespace detail

/// The metadata of a checkpoint (the .safetensors file, its .json or the stem) without
/// loading it into a model: e.g. its "structure", to rebuild a transformed model first.
inline nlohmann::json read_checkpoint_meta(const std::filesystem::path& path) {
  const auto file = detail::tensor_file(path);
  const std::string what = "checkpoint '" + file.string() + "'";
  qnum::detail::require(std::filesystem::exists(file), what, " not found");
  return detail::embedded_meta(read_safetensors(file), what).value_or(nlohmann::json::object());
}

/// The products' precision the checkpoint's model was made in: its run config's "precision"
/// (a Trainer's checkpoint) or a top-level "precision" (a lab's saved model); "fp32" when it
/// records none (runs before the setting existed, torch files).
inline std::string checkpoint_precision(const nlohmann::json& meta) {
  if (!meta.is_object()) return "fp32";
  if (meta.contains("config") && meta["config"].is_object() && meta["config"].contains("precision") &&
      meta["config"]["precision"].is_string())
    return meta["config"]["precision"].get<std::string>();
  if (meta.contains("precision") && meta["precision"].is_string()) return meta["precision"].get<std::string>();
  return "fp32";
}

/// Loads checkpoint tensors already read (parse_safetensors) and their metadata `meta` into
/// `model` (and `opt`, when not null), as load_checkpoint does; `what` names the checkpoint.
inline void load_checkpoint_state(SafetensorsFile st, const nlohmann::json& meta, const std::string& what,
                                  nn::Module& model, nn::Optimizer* opt) {
  if (meta.contains("format_version"))
    qnum::detail::require(
        meta["format_version"].is_number_integer() && meta["format_version"].get<int>() <= kCheckpointFormatVersion,
        what, ": format_version ", meta["format_version"].dump(), " is newer than this qnum (",
        kCheckpointFormatVersion, ")");

  qnum::detail::require(st.bytes.empty() || meta.contains("packed"), what, " holds byte tensors ('",
                        st.bytes.empty() ? "" : st.bytes.begin()->first, "') but no 'packed' description of them");
  std::map<std::string, Tensor> model_state, opt_state;
  for (auto& [name, t] : st.tensors) {
    if (name.rfind(kOptimizerPrefix, 0) == 0)
      opt_state.emplace(name.substr(std::char_traits<char>::length(kOptimizerPrefix)), t);
    else
      model_state.emplace(name, t);
  }
  if (opt) {
    const auto saved = meta.value("optimizer", nlohmann::json(nullptr));
    qnum::detail::require(saved.is_string(), what, " holds no optimizer state (it was saved without an optimizer)");
    qnum::detail::require(saved.get<std::string>() == opt->type_name(), what, " holds ", saved.get<std::string>(),
                          " state, not ", opt->type_name());
  }

  // Model first (all-or-nothing by itself); undo it if the optimizer state is rejected.
  const auto before = model.state_dict();
  const auto calls_before = detail::dropout_calls(model);
  try {
    model.load_state_dict(model_state);
  } catch (const Error& e) {
    qnum::detail::fail(what, " does not fit the model: ", e.what());
  }
  try {
    detail::restore_dropout_calls(model, meta.value("dropout_calls", nlohmann::json::object()));
    if (opt) opt->load_state_dict(opt_state);
  } catch (const Error& e) {
    model.load_state_dict(before);
    detail::restore_dropout_calls(model, calls_before);
    qnum::detail::fail(what, ": ", e.what());
  }
}

/// Loads a checkpoint written by save_checkpoint into `model` (and `opt`, when not null) and
/// returns its metadata. `path` is the .safetensors file, the .json file or the stem
/// ("runs/x/best"). Nothing changes unless everything loads: a tensor that is missing,
/// unexpected or of another shape (a checkpoint of another model) is a qnum::Error naming
/// it; so is optimizer state of another optimizer type or for other parameters.
inline nlohmann::json load_checkpoint(const std::filesystem::path& path, nn::Module& model, nn::Optimizer* opt) {
  const auto file = detail::tensor_file(path);
  const std::string what = "checkpoint '" + file.string() + "'";
  qnum::detail::require(std::filesystem::exists(file), what, " not found");
  SafetensorsFile st = read_safetensors(file);

  nlohmann::json meta = nlohmann::json::object();
  if (auto embedded = detail::embedded_meta(st, what)) {
    meta = std::move(*embedded);
  } else if (auto json_file = std::filesystem::path(file).replace_extension(".json");
             std::filesystem::exists(json_file)) {
    meta = io::parse_json(read_file(json_file), "'" + json_file.string() + "'", false);
    qnum::detail::require(meta.is_object(), what, ": '", json_file.string(), "' is not a JSON object");
  }
  load_checkpoint_state(std::move(st), meta, what, model, opt);
  return meta;
}

}  // namespace qnum::train
