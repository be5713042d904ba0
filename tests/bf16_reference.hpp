// The bf16 GEMM's definition for tests: op(A)·op(B)ᵀ element by element with qnum::bf16_dot
// on the rounded operands, in the chain this process's GEMM runs (qnum::bf16_gemm_chain()),
// and a row-major transpose to build the NN / TN operands of the same product. Shared by the kernel and tensor suites.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "qnum/kernel/gemm/bf16.hpp"

namespace qnum_test {

/// x [rows, cols] row-major -> its transpose [cols, rows].
template <class T>
std::vector<T> transposed(const std::vector<T>& x, std::int64_t rows, std::int64_t cols) {
  std::vector<T> t(x.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      t[static_cast<std::size_t>(c * rows + r)] = x[static_cast<std::size_t>(r * cols + c)];
  return t;
}

/// C[i,j] = the bf16 chain of row i of a [M,K] and row j of b [N,K], plus bias[j] in fp32 when given.
inline std::vector<float> bf16_reference_nt(const std::vector<float>& a, const std::vector<float>& b, std::int64_t M,
                                            std::int64_t N, std::int64_t K, const std::vector<float>& bias = {}) {
  std::vector<std::uint16_t> ah(a.size()), bh(b.size());
  std::transform(a.begin(), a.end(), ah.begin(), qnum::bf16_operand);
  std::transform(b.begin(), b.end(), bh.begin(), qnum::bf16_operand);
  std::vector<float> c(static_cast<std::size_t>(M * N));
  const qnum::Bf16Chain chain = qnum::bf16_gemm_chain();
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      float v = qnum::bf16_dot(ah.data() + i * K, bh.data() + j * K, K, chain);
      if (!bias.empty()) v += bias[static_cast<std::size_t>(j)];
      c[static_cast<std::size_t>(i * N + j)] = v;
    }
  return c;
}

}  // namespace qnum_test
