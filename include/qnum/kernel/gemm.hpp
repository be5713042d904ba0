// GEMM kernels, one header per kind (kernel/gemm/): fp32 (fp32.hpp, its register tile in
// fp32_micro.hpp), bf16 operands with fp32 accumulation (bf16.hpp), int8 x int8 -> int32
// fixed point (int8.hpp; micro-kernels int8_amx.hpp, int8_vnni.hpp, int8_madd16.hpp,
// int8_dot.hpp), MXINT8 ggml-style block dots (mxint8.hpp, mxint8_vnni.hpp) and binary
// XNOR-popcount (binary.hpp); tiles.hpp holds the argument checks and the output tiling they
// share.
//
// Layout: everything is row-major and in the "NT" form a Linear layer wants,
//     C[M,N] = A[M,K] · B[N,K]ᵀ      (y = x · Wᵀ with W [out, in]),
// so both operands run contiguously along K. gemm_f32_nn covers B given as [K,N], and
// gemm_f32_tn A given as [K,M] (read transposed while packing: backward's dW = dYᵀ·X).
//
// Determinism: work is cut into (row chunk, column chunk) tiles whose boundaries depend only
// on M, N and K; every output element is summed in one fixed order (K in chunks of
// kKC, each chunk an FMA chain, chunks added in order), so results are bit-identical for
// any qnum::set_num_threads. Integer paths are exact, so their order does not matter.
// Instruction sets are chosen at compile time (each kind's header says which it uses).
#pragma once

// GCC 12 reports its own AVX-512 intrinsics' _mm512_undefined_* sources when inlined in the
// kernels below (include them through this header).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "qnum/kernel/gemm/bf16.hpp"
#include "qnum/kernel/gemm/binary.hpp"
#include "qnum/kernel/gemm/fp32.hpp"
#include "qnum/kernel/gemm/int8.hpp"
#include "qnum/kernel/gemm/mxint8.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
