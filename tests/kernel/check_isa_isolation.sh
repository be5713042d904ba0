#!/usr/bin/env bash
# Static half of the proof that qnum::kernels is safe on any x86-64 CPU (the dynamic half runs
# the probe under QEMU with CPUs without AVX / AVX-512). In a linked, portable executable,
# every *global or weak* function (one any caller may be bound to) that uses AVX-encoded
# instructions (v*, k-mask moves, BMI/LZCNT) must belong to a dispatch level's own namespace
# (qnum::kernel::isa_avx2 / isa_avx512), be xsimd code for an AVX architecture, or be the
# level's entry function (called only once the CPU is known to run the level). Local IPA
# clones (".constprop", ".isra") are private to the level's object and not counted.
# Usage: check_isa_isolation.sh OBJDUMP NM EXECUTABLE
set -euo pipefail
objdump=$1
nm=$2
exe=$3
"$nm" --defined-only "$exe" | awk '{print $1, $2}' > "${TMPDIR:-/tmp}/qnum-isa-binding.$$"
trap 'rm -f "${TMPDIR:-/tmp}/qnum-isa-binding.$$"' EXIT
"$objdump" -d --no-show-raw-insn -C "$exe" | awk -v bindings="${TMPDIR:-/tmp}/qnum-isa-binding.$$" '
  BEGIN { while ((getline line < bindings) > 0) { split(line, parts, " "); addr = parts[1]; sub(/^0+/, "", addr); type[addr] = parts[2] } }
  /^[0-9a-f]+ <.*>:$/ {
    fn = $0; nfn++
    a = $1; sub(/^0+/, "", a)
    shared = (type[a] ~ /^[TWVuiw]$/)
    next
  }
  /\t(v[a-z0-9]+|kmov[a-z]+|shlx|sarx|shrx|andn|lzcnt|tzcnt)[ \t]/ {
    if (fn ~ /qnum::kernel::isa_avx(2|512)::|xsimd::.*(avx|fma3)|dispatch::detail::avx(2|512)_entry\(\)/) inside++
    else if (shared) bad[fn]++
    else local_clones[fn]++
  }
  END {
    nbad = 0; nloc = 0
    for (f in bad) { print "AVX instructions in a shared function outside the levels: " f; nbad++ }
    for (f in local_clones) nloc++
    printf "%d functions; %d AVX instructions inside the levels; %d local clones; %d shared functions outside\n",
           nfn, inside, nloc, nbad
    if (inside == 0) { print "no AVX code found at all: are the levels compiled in?"; exit 1 }
    exit nbad > 0
  }'
