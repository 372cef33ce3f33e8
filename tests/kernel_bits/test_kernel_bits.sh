#!/usr/bin/env bash
# The fp32 CPU kernels give the same bits whatever x86 target they are compiled for: kernels/cpu is
# built with tests/kernel_bits/kernel_fingerprint.cpp under 256- and 512-bit vector tuning (what GCC's
# -march=native picks on a Xeon and on a Zen 4), for Haswell (AVX2 only) and Zen 3 + AVX-512 flags, and
# every variant must print the same hashes; each binary runs here only if this CPU has its ISA (a
# Haswell build runs on any AVX2 CPU). The AVX2 GEMM is forced once too (--cpu_gemm avx2).
# Before kernels/cpu/lane_sum.hpp, `omp simd reduction` sums made attention, the loss entropy and the
# gradient norm differ between the 256- and 512-bit builds.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CXX=${CXX:-g++}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"
has() { grep -qw "$1" /proc/cpuinfo; }
variants=("native256:-march=native -mprefer-vector-width=256" "native512:-march=native -mprefer-vector-width=512"
          "haswell:-march=haswell")
has avx512f && has avx512bw && has avx512vl && has avx512dq &&
  variants+=("zen3avx512:-march=znver3 -mavx512f -mavx512vl -mavx512bw -mavx512dq -mavx512cd")
build() {  # build NAME FLAGS
  # shellcheck disable=SC2086
  "$CXX" -std=c++20 -O3 -DNDEBUG $2 -fopenmp -I include -I . tests/kernel_bits/kernel_fingerprint.cpp \
    kernels/cpu/*.cpp src/core/error.cpp -o "$WORK/$1" -lopenblas
}
failures=0
export OMP_NUM_THREADS=2
for v in "${variants[@]}"; do
  name=${v%%:*}
  (build "$name" "${v#*:}") &
done
wait
for v in "${variants[@]}"; do
  name=${v%%:*}
  [ -x "$WORK/$name" ] || { echo "FAIL $name: did not build"; failures=$((failures + 1)); continue; }
  "$WORK/$name" >"$WORK/$name.txt" || { echo "FAIL $name: exit $?"; failures=$((failures + 1)); }
done
"$WORK/haswell" --cpu_gemm avx2 >"$WORK/haswell-avx2gemm.txt"
echo "$(wc -l <"$WORK/native256.txt") kernel outputs; variants: ${variants[*]%%:*} haswell-avx2gemm"
for out in "$WORK"/*.txt; do
  cmp -s "$WORK/native256.txt" "$out" || {
    echo "FAIL $(basename "$out" .txt) differs from native256:"
    diff "$WORK/native256.txt" "$out" | head -8
    failures=$((failures + 1))
  }
done
[ "$(wc -l <"$WORK/native256.txt")" -ge 20 ] || { echo "FAIL too few outputs"; failures=$((failures + 1)); }
[ "$failures" -eq 0 ] && echo PASS || exit 1
