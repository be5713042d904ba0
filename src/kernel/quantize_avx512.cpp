// The avx512 level: x86-64-v4 (AVX-512 F/CD/DQ/BW/VL; xsimd's avx512bw).
#include "isa_entry.hpp"
#if QNUM_DISPATCH_X86
#define QNUM_KERNEL_ISA_NS isa_avx512
#define QNUM_ISA_ENTRY avx512_entry
#include "isa_kernels.inc"
#endif
