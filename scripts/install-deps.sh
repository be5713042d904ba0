#!/usr/bin/env bash
# Installs qnum's build and test dependencies from Debian packages. Idempotent:
# packages already present are skipped, and apt is not touched when nothing is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libeigen3-dev      # fp32 GEMM baseline and Eigen::Map over qnum buffers
  libxsimd-dev       # portable SIMD kernels
  doctest-dev        # unit tests
  libbenchmark-dev   # Google Benchmark
  libcli11-dev       # the qnum command line
  nlohmann-json3-dev # JSON metadata and manifests
  libtomlplusplus-dev # TOML run configs of `qnum train --config`
  zlib1g-dev         # gzip data files
  libarchive-dev     # `qnum download imdb` unpacks aclImdb_v1.tar.gz; torch's zip checkpoints (pytorch_model.bin)
  libsqlite3-dev     # search studies in Optuna's SQLite database layout (qnum search --storage sqlite:///…)
  libpq-dev          # search studies on a PostgreSQL server shared by several machines (--storage postgresql://…)
  postgresql         # tests: search.postgres starts a throw-away server in a temp dir (in a container
                     # without systemd the package only creates its idle cluster; nothing is started)
  qemu-user          # tests: run-time ISA dispatch on emulated CPUs without AVX / AVX-512
  gnuplot-nox        # lab1-ptq-qat / lab1-prune draw plot.png with it (pngcairo terminal, no X11)
  ccache             # build cache: rebuilds and fresh clones on the same machine compile once
  curl               # `qnum download jsc|imdb|bert-tiny|owner/name` (data/download.hpp runs curl) and their offline tests
  python3-dev        # the Python package (python/): headers the extension compiles against
  python3-venv       # scripts/test_python.sh builds and tests the Python package in a venv
  clang-19 libclang-rt-19-dev # second compiler: the sanitizer suite (test.sh --sanitize) and libFuzzer (fuzz.sh)
  libomp-19-dev      # OpenMP for clang-19 (Debian's libomp-dev is clang 14's): the sanitizer suite runs the threaded code
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
