// safetensors files (Hugging Face's tensor format): an 8-byte little-endian header length,
// a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then one
// raw little-endian buffer. qnum writes F32 (its Tensor type) and reads F32, F16 and BF16
// (both widen to float32 exactly), so checkpoints interchange with PyTorch and the
// `safetensors` package. The reader is as strict as the reference implementation (offsets
// contiguous and covering the buffer) and says what is wrong, naming the file; the writer
// sorts tensors by name and writes atomically.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/core/error.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/json.hpp"
#include "qnum/tensor/tensor.hpp"

namespace qnum {

static_assert(std::endian::native == std::endian::little, "qnum's safetensors IO assumes a little-endian host");

/// A tensor of bytes (dtype "I8" or "U8"): packed codes and scales of a quantized weight.
struct ByteTensor {
  std::string dtype;
  Shape shape;
  std::vector<std::uint8_t> data;
};

/// The contents of a safetensors file: float tensors (F32, F16, BF16, as float32) and byte
/// tensors (I8, U8) by name, and the free-form string metadata of the "__metadata__" entry.
struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, ByteTensor> bytes;
  std::map<std::string, std::string> metadata;
};

namespace detail {

/// IEEE binary16 bits to float (exact: every half is a float).
inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);  // inf / nan (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);  // normal: rebias 15 -> 127
  } else if (man == 0) {
    bits = sign;  // signed zero
  } else {        // subnormal: normalise into a float normal
    int e = 113;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --e;
    }
    bits = sign | (static_cast<std::uint32_t>(e) << 23) | ((man & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

/// bfloat16 bits to float (the upper half of a float).
inline float bf16_bits_to_float(std::uint16_t h) { return std::bit_cast<float>(std::uint32_t{h} << 16); }

/// Bytes per element of the dtypes safetensors defines (0 for an unknown name).
inline std::size_t safetensors_dtype_size(std::string_view d) {
  static const std::map<std::string_view, std::size_t> sizes{
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8},     {"C64", 8}};
  const auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

/// Reads a non-negative JSON integer below 2^62 or fails with `where`.
inline std::uint64_t safetensors_uint(const nlohmann::json& v, std::string_view what, std::string_view where) {
  require(v.is_number_unsigned() && v.get<std::uint64_t>() < (std::uint64_t{1} << 62), what, ": ", where,
          " must hold non-negative integers, got ", v.dump());
  return v.get<std::uint64_t>();
}

}  // namespace detail

/// Parses safetensors bytes; `what` names the source in error messages.
inline SafetensorsFile parse_safetensors(std::string_view bytes, std::string_view what) {
  using detail::require;
  require(bytes.size() >= 8, what, ": truncated safetensors file (", bytes.size(),
          " bytes; the 8-byte header length is missing)");
  std::uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  require(header_len <= bytes.size() - 8, what, ": header length ", header_len, " runs past the end of the file (",
          bytes.size() - 8, " bytes follow the length field)");
  const std::string_view header = bytes.substr(8, header_len);
  require(!header.empty() && header.front() == '{', what, ": header is not a JSON object (it must start with '{')");

  // nlohmann keeps the last of duplicate keys silently; record top-level keys to catch them.
  std::set<std::string> seen;
  std::string duplicate;
  nlohmann::json j;
  try {
    j = io::parse_json(header, std::string(what) + ": header", true,
                       [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& v) {
                         if (depth == 1 && ev == nlohmann::json::parse_event_t::key &&
                             !seen.insert(v.get<std::string>()).second && duplicate.empty())
                           duplicate = v.get<std::string>();
                         return true;
                       });
  } catch (const nlohmann::json::exception& e) {
    detail::fail(what, ": header is not valid JSON (", e.what(), ")");
  }
  require(j.is_object(), what, ": header is not a JSON object");
  require(duplicate.empty(), what, ": duplicate tensor name '", duplicate, "' in the header");

  const std::string_view buffer = bytes.substr(8 + header_len);
  struct Entry {
    std::string name;
    std::string dtype;
    Shape shape;
    std::uint64_t begin, end;
  };
  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [name, info] : j.items()) {
    if (name == "__metadata__") {
      require(info.is_object(), what, ": __metadata__ must be an object of strings");
      for (const auto& [k, v] : info.items()) {
        require(v.is_string(), what, ": __metadata__ value of '", k, "' is not a string (", v.dump(), ")");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string t = "tensor '" + name + "'";
    require(info.is_object(), what, ": ", t, " is not an object with dtype, shape and data_offsets");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      require(info.contains(key), what, ": ", t, " has no '", key, "'");
    require(info["dtype"].is_string(), what, ": ", t, ": dtype must be a string, got ", info["dtype"].dump());
    Entry e{name, info["dtype"].get<std::string>(), {}, 0, 0};
    const std::size_t esize = detail::safetensors_dtype_size(e.dtype);
    require(esize != 0, what, ": ", t, ": unknown dtype '", e.dtype, "'");
    require(e.dtype == "F32" || e.dtype == "F16" || e.dtype == "BF16" || e.dtype == "I8" || e.dtype == "U8", what,
            ": ", t, ": dtype ", e.dtype, " is not supported (qnum reads F32, F16 and BF16, and I8 and U8 as bytes)");
    require(info["shape"].is_array(), what, ": ", t, ": shape must be an array, got ", info["shape"].dump());
    std::uint64_t n = 1;
    for (const auto& d : info["shape"]) {
      const auto v = detail::safetensors_uint(d, what, t + ": shape");
      require(v == 0 || n <= (std::uint64_t{1} << 60) / v, what, ": ", t, ": shape ", info["shape"].dump(),
              " is too large");
      n *= v;
      e.shape.push_back(static_cast<std::int64_t>(v));
    }
    require(e.shape.size() <= kMaxTensorRank, what, ": ", t, ": rank ", e.shape.size(), " (shape ", to_string(e.shape),
            ") is above the ", kMaxTensorRank, " qnum tensors support");
    const auto& off = info["data_offsets"];
    require(off.is_array() && off.size() == 2, what, ": ", t, ": data_offsets must be [begin, end], got ", off.dump());
    e.begin = detail::safetensors_uint(off[0], what, t + ": data_offsets");
    e.end = detail::safetensors_uint(off[1], what, t + ": data_offsets");
    require(e.begin <= e.end, what, ": ", t, ": data_offsets [", e.begin, ", ", e.end, "] end before they begin");
    require(e.end <= buffer.size(), what, ": ", t, ": data_offsets [", e.begin, ", ", e.end,
            "] run past the data buffer (", buffer.size(), " bytes)");
    require(e.end - e.begin == n * esize, what, ": ", t, ": data_offsets [", e.begin, ", ", e.end, "] hold ",
            e.end - e.begin, " bytes, but shape ", to_string(e.shape), " of ", e.dtype, " needs ", n * esize);
    entries.push_back(std::move(e));
  }

  // The buffer must be tiled exactly: sorted by offset, each tensor starts where the last ended.
  std::vector<const Entry*> order;
  for (const auto& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : order) {
    require(e->begin >= pos, what, ": tensors '", prev ? prev->name : "", "' and '", e->name,
            "' overlap in the data buffer ([", prev ? prev->begin : 0, ", ", pos, ") and [", e->begin, ", ", e->end,
            "))");
    require(e->begin == pos, what, ": ", e->begin - pos, " unused bytes before tensor '", e->name,
            "' in the data buffer (offset ", pos, ")");
    pos = e->end;
    prev = e;
  }
  require(pos == buffer.size(), what, ": ", buffer.size() - pos, " bytes after the last tensor in the data buffer");

  for (const auto& e : entries) {
    const char* src = buffer.data() + e.begin;
    if (e.dtype == "I8" || e.dtype == "U8") {
      out.bytes.emplace(e.name, ByteTensor{e.dtype, e.shape, std::vector<std::uint8_t>(src, src + (e.end - e.begin))});
      continue;
    }
    std::vector<float> v(static_cast<std::size_t>(numel(e.shape)));
    if (e.dtype == "F32") {
      if (!v.empty()) std::memcpy(v.data(), src, v.size() * 4);
    } else {
      for (std::size_t i = 0; i < v.size(); ++i) {
        std::uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        v[i] = e.dtype == "F16" ? detail::half_bits_to_float(h) : detail::bf16_bits_to_float(h);
      }
    }
    out.tensors.emplace(e.name, Tensor(e.shape, std::move(v)));
  }
  return out;
}

/// Reads a safetensors file (F32, F16 or BF16 tensors as float32; I8 and U8 as bytes).
inline SafetensorsFile read_safetensors(const std::filesystem::path& path) {
  return parse_safetensors(read_file(path), path.string());
}

/// Serialises tensors (sorted by name, as F32, contiguous offsets), then byte tensors (I8 or
/// U8, their data numel(shape) bytes), and string metadata.
inline std::string safetensors_bytes(const std::map<std::string, Tensor>& tensors,
                                     const std::map<std::string, std::string>& metadata = {},
                                     const std::map<std::string, ByteTensor>& byte_tensors = {}) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t pos = 0;
  for (const auto& [name, t] : tensors) {
    detail::require(name != "__metadata__", "safetensors: '__metadata__' is reserved and cannot name a tensor");
    detail::require(t.defined(), "safetensors: tensor '", name, "' is undefined");
    const std::uint64_t bytes = static_cast<std::uint64_t>(t.numel()) * 4;
    header[name] = {{"dtype", "F32"}, {"shape", t.shape()}, {"data_offsets", {pos, pos + bytes}}};
    pos += bytes;
  }
  for (const auto& [name, b] : byte_tensors) {
    detail::require(name != "__metadata__" && !tensors.contains(name), "safetensors: byte tensor '", name,
                    "' is reserved or names a float tensor too");
    detail::require(b.dtype == "I8" || b.dtype == "U8", "safetensors: byte tensor '", name, "' has dtype '", b.dtype,
                    "', not I8 or U8");
    detail::require(static_cast<std::uint64_t>(numel(b.shape)) == b.data.size(), "safetensors: byte tensor '", name,
                    "' holds ", b.data.size(), " bytes for shape ", to_string(b.shape));
    header[name] = {{"dtype", b.dtype}, {"shape", b.shape}, {"data_offsets", {pos, pos + b.data.size()}}};
    pos += b.data.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::type_error& e) {  // 316: a name or metadata string that is not UTF-8
    detail::fail("safetensors: tensor names and metadata must be valid UTF-8 (", e.what(), ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // 8-byte alignment of the buffer, as the reference writer does
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((std::uint64_t{text.size()} >> (8 * i)) & 0xff);
  out.reserve(8 + text.size() + pos);
  out += text;
  for (const auto& [name, t] : tensors)
    out.append(reinterpret_cast<const char*>(t.data()), static_cast<std::size_t>(t.numel()) * 4);
  for (const auto& [name, b] : byte_tensors) out.append(reinterpret_cast<const char*>(b.data.data()), b.data.size());
  return out;
}

/// Writes tensors as F32 safetensors (and byte tensors as I8 / U8) atomically (temp file + rename).
inline void write_safetensors(const std::filesystem::path& path, const std::map<std::string, Tensor>& tensors,
                              const std::map<std::string, std::string>& metadata = {},
                              const std::map<std::string, ByteTensor>& byte_tensors = {}) {
  write_file_atomic(path, safetensors_bytes(tensors, metadata, byte_tensors));
}

}  // namespace qnum
