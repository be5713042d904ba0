// Uniform draws for the TPE and NSGA-II samplers. Every random decision Optuna's TPE makes is one
// numpy `random_sample()` double (choice with p, rand, uniform), so a sampler that reads
// doubles from a `UniformSource` can be fed numpy's own draws in tests, or run from
// `NumpyRandomState`, a twin of numpy's legacy RandomState (MT19937, 53-bit doubles).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "qnum/core/error.hpp"

namespace qnum::search {

/// A stream of uniform doubles in [0, 1), the only randomness the TPE sampler consumes.
class UniformSource {
 public:
  virtual ~UniformSource() = default;
  /// The next double in [0, 1).
  virtual double next_double() = 0;
};

/// numpy.random.RandomState(seed) twin: MT19937 with numpy's legacy integer seeding
/// (init_genrand, seed in [0, 2^32)); `next_double()` is `random_sample()` bit for bit.
class NumpyRandomState final : public UniformSource {
 public:
  explicit NumpyRandomState(std::uint32_t seed = 0) { seed_with(seed); }

  void seed_with(std::uint32_t seed) {
    mt_[0] = seed;
    for (std::uint32_t i = 1; i < kN; ++i) mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + i;
    pos_ = kN;
  }

  /// The next tempered 32-bit output (numpy's mt19937_next32).
  std::uint32_t next_u32() {
    if (pos_ >= kN) generate();
    std::uint32_t y = mt_[pos_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
  }

  /// Legacy randint(0, n) (e.g. choice(n)): masked rejection on 32-bit draws, n in [1, 2^32].
  std::uint64_t randint(std::uint64_t n) {
    qnum::detail::require(n >= 1 && n <= 0x100000000ull, "NumpyRandomState: randint bound ", n, " outside [1, 2^32]");
    const std::uint64_t rng = n - 1;
    if (rng == 0) return 0;
    if (rng == 0xffffffffull) return next_u32();
    std::uint64_t mask = rng;
    for (int s = 1; s <= 32; s <<= 1) mask |= mask >> s;
    std::uint64_t v;
    while ((v = (next_u32() & mask)) > rng) {
    }
    return v;
  }

  /// random_sample(): (a >> 5, b >> 6) as a 53-bit fraction.
  double next_double() override {
    const std::uint32_t a = next_u32() >> 5, b = next_u32() >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
  }

 private:
  static constexpr std::uint32_t kN = 624, kM = 397;

  void generate() {
    constexpr std::uint32_t upper = 0x80000000u, lower = 0x7fffffffu, matrix = 0x9908b0dfu;
    for (std::uint32_t i = 0; i < kN; ++i) {
      const std::uint32_t y = (mt_[i] & upper) | (mt_[(i + 1) % kN] & lower);
      mt_[i] = mt_[(i + kM) % kN] ^ (y >> 1) ^ ((y & 1u) ? matrix : 0u);
    }
    pos_ = 0;
  }

  std::array<std::uint32_t, kN> mt_{};
  std::uint32_t pos_ = kN;
};

/// Replays recorded doubles (e.g. numpy's draws captured by a fixture); running out is an error.
class ReplaySource final : public UniformSource {
 public:
  explicit ReplaySource(std::vector<double> draws) : draws_(std::move(draws)) {}
  double next_double() override {
    qnum::detail::require(pos_ < draws_.size(), "ReplaySource: all ", draws_.size(), " recorded draws used");
    return draws_[pos_++];
  }
  std::size_t consumed() const { return pos_; }

 private:
  std::vector<double> draws_;
  std::size_t pos_ = 0;
};

namespace detail {

/// numpy legacy `choice(len(p), p=p)` for one draw: searchsorted(cumsum(p)/cdf[-1], u, 'right').
inline std::size_t choice_from_cdf(const std::vector<double>& cdf, double u) {
  std::size_t lo = 0, hi = cdf.size();
  while (lo < hi) {  // first index with cdf[i] > u
    const std::size_t mid = (lo + hi) / 2;
    if (cdf[mid] <= u)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// The normalised cumulative sum numpy's legacy `choice` builds from p (sequential cumsum).
inline std::vector<double> choice_cdf(const std::vector<double>& p) {
  std::vector<double> cdf(p.size());
  double acc = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) cdf[i] = acc = acc + p[i];
  const double last = cdf.empty() ? 1.0 : cdf.back();
  for (double& c : cdf) c /= last;
  return cdf;
}

}  // namespace detail
}  // namespace qnum::search
