// The baseline level: the kernels for the library's own flags (SSE2 on x86-64).
#define QNUM_KERNEL_ISA_NS isa_baseline
#define QNUM_ISA_ENTRY baseline_entry
#include "isa_kernels.inc"

// Shared (weak, COMDAT) helpers that the baseline level inlines but an AVX level may call out
// of line: taking their addresses here emits a baseline copy, which the linker keeps (this
// member precedes the AVX ones), so no caller outside the AVX levels binds to AVX code.
// kernel.isa_isolation names any function that needs to be added.
namespace {
[[gnu::used]] const void* const kBaselineCopies[] = {
    reinterpret_cast<const void*>(&qnum::detail::mase_fix_zero_blocks),
    reinterpret_cast<const void*>(&qnum::detail::mase_mx_order),
    reinterpret_cast<const void*>(&qnum::detail::mase_block_fp_scale),
};
}  // namespace
template class std::vector<int>;  // the same for its members (constructors have no address)
