# Sourced by test-sanitize.sh and fuzz.sh: sanitizer reports name functions and lines.
# llvm-symbolizer is in Debian's llvm-19 package, not clang-19, so binutils' addr2line (which
# the sanitizers also drive) stands in without it. Sets $sanitizer_symbolizer (":external_
# symbolizer_path=...", or empty) for the callers' ASAN_OPTIONS / UBSAN_OPTIONS.
symbolizer=$(command -v llvm-symbolizer-19 || command -v llvm-symbolizer || command -v addr2line || true)
sanitizer_symbolizer=${symbolizer:+:external_symbolizer_path=$symbolizer}
