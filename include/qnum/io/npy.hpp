// NumPy .npy files (format versions 1.0-3.0) holding little-endian float32 in C order —
// the tensors `qnum quantize` reads and writes. Anything else is rejected with a message
// that says what is wrong (truncated, not float32, Fortran order, not .npy at all).
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/core/excerpt.hpp"
#include "qnum/core/shape.hpp"
#include "qnum/io/atomic_file.hpp"

namespace qnum {

/// A float32 tensor as stored in an .npy file.
struct NpyArray {
  Shape shape;
  std::vector<float> data;
};

namespace detail {

inline std::string_view npy_dict_value(std::string_view header, std::string_view key, std::string_view what) {
  const std::string quoted = "'" + std::string(key) + "'";
  auto pos = header.find(quoted);
  require(pos != std::string_view::npos, what, ": .npy header has no '", key, "' entry");
  pos = header.find(':', pos + quoted.size());
  require(pos != std::string_view::npos, what, ": malformed .npy header");
  std::string_view rest = header.substr(pos + 1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  return rest;
}

}  // namespace detail

/// Parses .npy bytes; `what` names the source in error messages.
inline NpyArray parse_npy(std::string_view bytes, std::string_view what) {
  using detail::require;
  require(bytes.size() >= 10 && bytes.substr(0, 6) == std::string_view("\x93NUMPY", 6), what,
          ": not a .npy file (missing \\x93NUMPY magic)");
  const auto major = static_cast<unsigned char>(bytes[6]);
  require(major >= 1 && major <= 3, what, ": unsupported .npy version ", int(major));
  std::size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else {
    require(bytes.size() >= 12, what, ": truncated .npy header");
    for (int i = 0; i < 4; ++i) header_len |= std::size_t{static_cast<unsigned char>(bytes[8 + i])} << (8 * i);
    offset = 12;
  }
  require(bytes.size() >= offset + header_len, what, ": truncated .npy header");
  const std::string_view header = bytes.substr(offset, header_len);
  require(header.find('{') != std::string_view::npos && header.find('}') != std::string_view::npos, what,
          ": malformed .npy header");

  const auto descr = detail::npy_dict_value(header, "descr", what);
  require(descr.substr(0, 5) == "'<f4'", what, ": dtype ", detail::excerpt(descr.substr(0, descr.find_first_of(",}"))),
          " is not little-endian float32 ('<f4'); convert with x.astype(np.float32)");
  const auto fortran = detail::npy_dict_value(header, "fortran_order", what);
  require(fortran.substr(0, 5) == "False", what,
          ": Fortran-ordered array; save a C-ordered copy (np.ascontiguousarray)");
  auto shape_text = detail::npy_dict_value(header, "shape", what);
  require(!shape_text.empty() && shape_text.front() == '(', what, ": malformed shape in .npy header");
  const auto close = shape_text.find(')');
  require(close != std::string_view::npos, what, ": malformed shape in .npy header");
  shape_text = shape_text.substr(1, close - 1);

  NpyArray arr;
  std::size_t i = 0;
  while (i < shape_text.size()) {
    while (i < shape_text.size() && (shape_text[i] == ' ' || shape_text[i] == ',')) ++i;
    if (i >= shape_text.size()) break;
    std::int64_t d = 0;
    bool any = false;
    while (i < shape_text.size() && shape_text[i] >= '0' && shape_text[i] <= '9') {
      d = d * 10 + (shape_text[i] - '0');
      require(d < (std::int64_t{1} << 40), what, ": dimension too large in .npy header");
      any = true;
      ++i;
    }
    require(any, what, ": malformed shape in .npy header");
    arr.shape.push_back(d);
  }
  const std::int64_t n = numel(arr.shape, what);
  const std::size_t data_off = offset + header_len;
  const std::size_t have = bytes.size() - data_off;
  // Compared as a count (have / 4), not in bytes: n * 4 may not fit in 64 bits.
  require(static_cast<std::uint64_t>(n) <= have / 4, what, ": truncated .npy data (", have, " bytes, shape ",
          to_string(arr.shape), " needs ",
          n <= INT64_MAX / 4 ? std::to_string(n * 4) : std::to_string(n) + " x 4", ")");
  require(have == static_cast<std::size_t>(n) * 4, what, ": .npy has ", have - static_cast<std::size_t>(n) * 4,
          " trailing bytes after the data");
  arr.data.resize(static_cast<std::size_t>(n));
  if (n > 0) std::memcpy(arr.data.data(), bytes.data() + data_off, static_cast<std::size_t>(n) * 4);
  return arr;
}

/// Reads a float32 C-order .npy file.
inline NpyArray read_npy(const std::filesystem::path& path) { return parse_npy(read_file(path), path.string()); }

/// Serialises a float32 tensor as .npy version 1.0 bytes.
inline std::string npy_bytes(const Shape& shape, const float* data) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i)
    dict += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
  dict += "), }";
  std::size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>((dict.size() >> 8) & 0xff);
  out += dict;
  const auto n = static_cast<std::size_t>(numel(shape));
  out.append(reinterpret_cast<const char*>(data), n * 4);
  return out;
}

/// Writes a float32 tensor atomically (temp file + rename).
inline void write_npy(const std::filesystem::path& path, const Shape& shape, const std::vector<float>& data) {
  detail::require(static_cast<std::int64_t>(data.size()) == numel(shape), "write_npy: ", data.size(),
                  " values do not match shape ", to_string(shape));
  write_file_atomic(path, npy_bytes(shape, data.data()));
}

}  // namespace qnum
