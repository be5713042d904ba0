// Message digests for checking downloads: MD5 (RFC 1321; what Stanford and OpenML publish),
// SHA-1 (the git blob ids the Hugging Face hub lists for small files) and SHA-256 (FIPS
// 180-4; the hub's LFS object ids). Our own, ~200 lines: OpenSSL would be a new library
// dependency of every program including the data headers for three fixed algorithms.
// All three share the Merkle-Damgard framing (64-byte blocks, 0x80 padding, a 64-bit bit
// count), which BlockDigest does once; they differ in the compression function and in byte
// order (MD5 little-endian, SHA big-endian).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qnum/core/error.hpp"

namespace qnum {

namespace detail {

/// Buffering, padding and hex output of a 64-byte-block digest. `Derived` has
/// `compress(const std::array<std::uint8_t, 64>&)` and a `state_` array of 32-bit words.
template <class Derived, bool BigEndian>
class BlockDigest {
 public:
  void update(std::span<const std::uint8_t> data) {
    for (std::uint8_t b : data) {
      block_[fill_++] = b;
      if (fill_ == 64) {
        static_cast<Derived*>(this)->compress(block_);
        fill_ = 0;
      }
    }
    bytes_ += data.size();
  }
  void update(std::string_view s) { update({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}); }

  /// The digest as lowercase hex digits (finishes the hash: call once).
  std::string hex() {
    const std::uint64_t bits = bytes_ * 8;
    const std::uint8_t one = 0x80, zero = 0;
    update({&one, 1});
    while (fill_ != 56) update({&zero, 1});
    std::array<std::uint8_t, 8> len{};
    for (int i = 0; i < 8; ++i)
      len[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(bits >> (8 * (BigEndian ? 7 - i : i)));
    update(len);
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (std::uint32_t w : static_cast<Derived*>(this)->state_)
      for (int i = 0; i < 4; ++i) {
        const auto byte = (w >> (8 * (BigEndian ? 3 - i : i))) & 0xFF;
        out += digits[byte >> 4];
        out += digits[byte & 15];
      }
    return out;
  }

 protected:
  static std::uint32_t rotl(std::uint32_t x, int c) { return (x << c) | (x >> ((32 - c) & 31)); }
  static std::uint32_t rotr(std::uint32_t x, int c) { return (x >> c) | (x << ((32 - c) & 31)); }
  /// Word i of a block in the digest's byte order.
  static std::uint32_t word(const std::array<std::uint8_t, 64>& b, std::size_t i) {
    const std::uint32_t b0 = b[4 * i], b1 = b[4 * i + 1], b2 = b[4 * i + 2], b3 = b[4 * i + 3];
    return BigEndian ? (b0 << 24) | (b1 << 16) | (b2 << 8) | b3 : b0 | (b1 << 8) | (b2 << 16) | (b3 << 24);
  }

 private:
  std::array<std::uint8_t, 64> block_{};
  std::size_t fill_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace detail

/// Incremental MD5: update() with any chunks, then hex() once (32 hex digits).
class Md5 : public detail::BlockDigest<Md5, false> {
  friend class detail::BlockDigest<Md5, false>;

  void compress(const std::array<std::uint8_t, 64>& block) {
    static constexpr std::array<std::uint32_t, 64> k = {
        0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
        0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
        0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
        0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
        0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
        0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
        0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
        0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
    static constexpr std::array<int, 16> r = {7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21};
    std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    for (std::size_t i = 0; i < 64; ++i) {
      std::uint32_t f = 0;
      std::size_t g = 0;
      if (i < 16) {
        f = (b & c) | (~b & d), g = i;
      } else if (i < 32) {
        f = (d & b) | (~d & c), g = (5 * i + 1) % 16;
      } else if (i < 48) {
        f = b ^ c ^ d, g = (3 * i + 5) % 16;
      } else {
        f = c ^ (b | ~d), g = (7 * i) % 16;
      }
      const std::uint32_t t = d;
      d = c;
      c = b;
      b = b + rotl(a + f + k[i] + word(block, g), r[(i / 16) * 4 + i % 4]);
      a = t;
    }
    state_[0] += a, state_[1] += b, state_[2] += c, state_[3] += d;
  }

  std::array<std::uint32_t, 4> state_{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
};

/// Incremental SHA-1 (FIPS 180-4): 40 hex digits. Used only to check git blob ids.
class Sha1 : public detail::BlockDigest<Sha1, true> {
  friend class detail::BlockDigest<Sha1, true>;

  void compress(const std::array<std::uint8_t, 64>& block) {
    std::array<std::uint32_t, 80> w{};
    for (std::size_t i = 0; i < 16; ++i) w[i] = word(block, i);
    for (std::size_t i = 16; i < 80; ++i) w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3], e = state_[4];
    for (std::size_t i = 0; i < 80; ++i) {
      std::uint32_t f = 0, k = 0;
      if (i < 20) {
        f = (b & c) | (~b & d), k = 0x5a827999;
      } else if (i < 40) {
        f = b ^ c ^ d, k = 0x6ed9eba1;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdc;
      } else {
        f = b ^ c ^ d, k = 0xca62c1d6;
      }
      const std::uint32_t t = rotl(a, 5) + f + e + k + w[i];
      e = d;
      d = c;
      c = rotl(b, 30);
      b = a;
      a = t;
    }
    state_[0] += a, state_[1] += b, state_[2] += c, state_[3] += d, state_[4] += e;
  }

  std::array<std::uint32_t, 5> state_{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
};

/// Incremental SHA-256 (FIPS 180-4): 64 hex digits.
class Sha256 : public detail::BlockDigest<Sha256, true> {
  friend class detail::BlockDigest<Sha256, true>;

  void compress(const std::array<std::uint8_t, 64>& block) {
    static constexpr std::array<std::uint32_t, 64> k = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    std::array<std::uint32_t, 64> w{};
    for (std::size_t i = 0; i < 16; ++i) w[i] = word(block, i);
    for (std::size_t i = 16; i < 64; ++i) {
      const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::array<std::uint32_t, 8> v = state_;
    for (std::size_t i = 0; i < 64; ++i) {
      const std::uint32_t s1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25);
      const std::uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
      const std::uint32_t t1 = v[7] + s1 + ch + k[i] + w[i];
      const std::uint32_t s0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22);
      const std::uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
      for (std::size_t j = 7; j > 0; --j) v[j] = v[j - 1];
      v[4] += t1;
      v[0] = t1 + s0 + maj;
    }
    for (std::size_t i = 0; i < 8; ++i) state_[i] += v[i];
  }

  std::array<std::uint32_t, 8> state_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
};

/// The digest `H` of a string, as lowercase hex.
template <class H>
std::string digest_hex(std::string_view s) {
  H h;
  h.update(s);
  return h.hex();
}

/// Feeds a file's bytes to `h` (after `prefix`); qnum::Error naming the file if it cannot be read.
template <class H>
std::string digest_file(const std::filesystem::path& path, std::string_view prefix = {}) {
  std::ifstream in(path, std::ios::binary);
  detail::require(static_cast<bool>(in), "checksum: cannot open '", path.string(), "'");
  H h;
  h.update(prefix);
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update({reinterpret_cast<const std::uint8_t*>(buf.data()), static_cast<std::size_t>(in.gcount())});
  }
  detail::require(in.eof(), "checksum: read error on '", path.string(), "'");
  return h.hex();
}

/// The git blob id of a file (SHA-1 of "blob <size>\0" + bytes), as the hub lists for
/// files kept in git rather than LFS.
inline std::string git_blob_sha1_file(const std::filesystem::path& path) {
  const auto size = std::filesystem::file_size(path);
  const std::string header = "blob " + std::to_string(size) + std::string(1, '\0');
  return digest_file<Sha1>(path, header);
}

}  // namespace qnum
