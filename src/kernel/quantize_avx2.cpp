// The avx2 level: x86-64-v3 (AVX2, FMA, BMI2, F16C...; xsimd's fma3<avx2>).
#include "isa_entry.hpp"
#if QNUM_DISPATCH_X86
#define QNUM_KERNEL_ISA_NS isa_avx2
#define QNUM_ISA_ENTRY avx2_entry
#include "isa_kernels.inc"
#endif
