// The baseline level: the kernels for the library's own flags (SSE2 on x86-64).
#define QNUM_KERNEL_ISA_NS isa_baseline
#define QNUM_ISA_ENTRY baseline_entry
#include "isa_kernels.inc"
