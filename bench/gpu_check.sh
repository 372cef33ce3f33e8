#!/usr/bin/env bash
# One-shot GPU check of the CUDA backend: configure + build for this GPU, run the CUDA tests, run the
# benchmark (and the PyTorch peer when torch + transformers are importable), and write logs and a
# summary table to $OUT (default ./gpu-results).
#
#   bench/gpu_check.sh                 # everything
#   STAGES="build test" bench/gpu_check.sh
#
# Environment: OUT (results folder), BUILD (build folder, default build-gpu), JOBS (default nproc),
# CUDA_ARCH (default 90), STAGES (subset of "build test bench peer"), BENCH_ARGS (extra gpu_bench
# flags, e.g. "--layers 4" for a quick run), PEER_MODES (gpu_peer.py modes, default "fp32 tf32
# autocast": fp32/tf32 are the peers of gpu_bench's fp32/TF32 Decoder, autocast the bf16 target),
# TEST_TIMEOUT (seconds per test binary, default 600).
# Rough durations on an H100/H200 node with 16 cores: build 3-5 min (the whole library plus the CUDA
# tests), tests ~1 min, each gpu_bench run ~1 min (init of 0.5B parameters included), each peer ~1 min.
# Dependencies: when the Debian dev packages are missing, the vendored sysroot is used
# (third_party/sysroot, made by scripts/vendor-debs.sh; unpacked here from third_party/debs if only
# the .deb files are present). No network is needed. Exit status: 0 when every stage that ran passed.
set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$PWD/gpu-results}
BUILD=${BUILD:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
CUDA_ARCH=${CUDA_ARCH:-90}
STAGES=${STAGES:-build test bench peer}
BENCH_ARGS=${BENCH_ARGS:-}
TEST_TIMEOUT=${TEST_TIMEOUT:-600}
PEER_MODES=${PEER_MODES:-fp32 tf32 autocast}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.md
status=0

log() { echo "[gpu_check $(date +%H:%M:%S)] $*" | tee -a "$OUT/gpu_check.log"; }
row() { echo "| $1 | $2 | $3 |" >> "$SUMMARY"; }
has_stage() { case " $STAGES " in *" $1 "*) return 0 ;; esac; return 1; }

{
  echo "# GPU check $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "commit $(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2> /dev/null || echo ' (+ local changes)')"
  echo
  echo "| stage | result | detail |"
  echo "|---|---|---|"
} > "$SUMMARY"

# ---- environment ---------------------------------------------------------------------------------------
{
  nvidia-smi 2>&1 || echo "nvidia-smi: not available"
  echo; nvcc --version 2>&1 || /usr/local/cuda/bin/nvcc --version 2>&1 || echo "nvcc: not found"
  echo; cmake --version 2>&1 | head -1; g++ --version 2>&1 | head -1; nproc
  echo; head -2 /etc/os-release 2> /dev/null
} > "$OUT/environment.txt"
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2> /dev/null | head -1)
row environment "${gpu:-no nvidia-smi}" "$(nproc) cores; see environment.txt"

# ---- dependencies: system packages or the vendored sysroot ------------------------------------------------
CMAKE_DEP_ARGS=()
have_system_deps() {
  [ -f /usr/include/hdf5/openmpi/hdf5.h ] && [ -f /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] &&
    [ -f /usr/include/boost/program_options.hpp ] && [ -f /usr/include/yaml-cpp/yaml.h ] &&
    [ -f /usr/include/nlohmann/json.hpp ] && [ -f /usr/include/pcre2.h ] && [ -f /usr/include/gtest/gtest.h ] &&
    ls /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so > /dev/null 2>&1
}
if have_system_deps; then
  log "dependencies: system packages"
  row dependencies system "Debian dev packages present"
else
  if [ ! -f "$ROOT/third_party/sysroot/env.sh" ] && ls "$ROOT"/third_party/debs/*.deb > /dev/null 2>&1; then
    log "dependencies: unpacking third_party/debs into third_party/sysroot"
    bash "$ROOT/scripts/vendor-debs.sh" --unpack-only >> "$OUT/gpu_check.log" 2>&1
  fi
  if [ -f "$ROOT/third_party/sysroot/env.sh" ]; then
    # shellcheck disable=SC1091
    . "$ROOT/third_party/sysroot/env.sh"
    CMAKE_DEP_ARGS=("${TRLHPC_SYSROOT_CMAKE_ARGS[@]}")
    log "dependencies: vendored sysroot $TRLHPC_SYSROOT"
    row dependencies "vendored sysroot" "third_party/sysroot (scripts/vendor-debs.sh)"
  else
    log "dependencies: dev packages missing and no third_party/sysroot or third_party/debs; configure will likely fail"
    row dependencies MISSING "run scripts/vendor-debs.sh on a networked Debian 12 machine first"
  fi
fi

# ---- build ---------------------------------------------------------------------------------------------------
CUDA_TESTS=(cuda_test_elementwise cuda_test_matmul cuda_test_embedding cuda_test_rmsnorm cuda_test_rope
            cuda_test_swiglu cuda_test_attention cuda_test_cross_entropy cuda_test_adamw cuda_test_allocator
            cuda_test_model_step)
if has_stage build; then
  log "configure ($BUILD, CUDA architectures $CUDA_ARCH)"
  start=$(date +%s)
  if cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTRLHPC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" \
      "${CMAKE_DEP_ARGS[@]}" > "$OUT/configure.log" 2>&1; then
    row configure ok "CMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH"
    log "build (-j$JOBS)"
    if make -C "$BUILD" -j"$JOBS" trlhpc_cuda "${CUDA_TESTS[@]}" test_elementwise_math gpu_bench > "$OUT/build.log" 2>&1; then
      row build ok "$(($(date +%s) - start)) s (configure + build, -j$JOBS)"
    else
      row build FAILED "see build.log: $(grep -m1 -E 'error' "$OUT/build.log" | cut -c1-150)"
      status=1
    fi
  else
    row configure FAILED "see configure.log: $(grep -m1 -A2 'CMake Error' "$OUT/configure.log" | tr '\n' ' ' | cut -c1-150)"
    status=1
  fi
fi

# ---- tests -----------------------------------------------------------------------------------------------------
if has_stage test; then
  mkdir -p "$OUT/tests"
  for t in test_elementwise_math "${CUDA_TESTS[@]}"; do
    exe=$BUILD/tests/$t
    if [ ! -x "$exe" ]; then
      row "$t" "NOT BUILT" ""
      status=1
      continue
    fi
    log "test $t"
    (cd "$ROOT" && TRLHPC_SHARED_DATA=${TRLHPC_SHARED_DATA:-$ROOT/../shared/data} OMP_NUM_THREADS=${OMP_NUM_THREADS:-8} \
      timeout "$TEST_TIMEOUT" "$exe" --gtest_output=xml:"$OUT/tests/$t.xml") > "$OUT/tests/$t.log" 2>&1
    rc=$?
    passed=$(grep -c '^\[       OK \]' "$OUT/tests/$t.log")
    failed=$(grep -c '^\[  FAILED  \] .*(' "$OUT/tests/$t.log")
    skipped=$(grep -c '^\[  SKIPPED \] .*(' "$OUT/tests/$t.log")
    if [ $rc -eq 0 ] && [ "$failed" -eq 0 ] && [ "$passed" -eq 0 ] && [ "$skipped" -gt 0 ]; then
      row "$t" "SKIPPED" "$skipped skipped: $(grep -m1 -A1 'Skipped' "$OUT/tests/$t.log" | tail -1 | cut -c1-120)"
    elif [ $rc -eq 0 ] && [ "$failed" -eq 0 ]; then
      row "$t" ok "$passed passed, $skipped skipped"
    else
      [ $rc -eq 124 ] && note="timed out after ${TEST_TIMEOUT}s; " || note=""
      row "$t" FAILED "${note}$passed passed, $failed failed, $skipped skipped (exit $rc); tests/$t.log"
      status=1
    fi
  done
fi

# ---- benchmark -------------------------------------------------------------------------------------------------
tokens_per_s() { awk -F'|' '/Qwen2.5-0.5B shape/ {gsub(/ /, "", $5); print $5; exit}' "$1" 2> /dev/null; }
if has_stage bench; then
  if [ -x "$BUILD/bench/gpu_bench" ]; then
    for variant in fp32 tf32; do
      flags=$BENCH_ARGS
      [ $variant = tf32 ] && flags="$flags --tf32 --skip_kernels"  # the kernel table does not depend on it
      log "gpu_bench $variant $flags"
      # shellcheck disable=SC2086
      if timeout 900 "$BUILD/bench/gpu_bench" $flags --out "$OUT/gpu_bench_$variant.md" > "$OUT/gpu_bench_$variant.log" 2>&1; then
        row "gpu_bench $variant" "$(tokens_per_s "$OUT/gpu_bench_$variant.md") tokens/s" "gpu_bench_$variant.md"
      else
        row "gpu_bench $variant" FAILED "see gpu_bench_$variant.log: $(tail -1 "$OUT/gpu_bench_$variant.log" | cut -c1-150)"
        status=1
      fi
    done
  else
    row gpu_bench "NOT BUILT" ""
    status=1
  fi
fi

# ---- PyTorch peer --------------------------------------------------------------------------------------------
if has_stage peer; then
  if python3 -c "import torch, transformers; assert torch.cuda.is_available()" > /dev/null 2>&1; then
    layers=$(echo "$BENCH_ARGS" | sed -n 's/.*--layers[ =]\([0-9]*\).*/\1/p')
    for mode in $PEER_MODES; do
      log "gpu_peer $mode"
      if timeout 900 python3 "$ROOT/bench/gpu_peer.py" --mode $mode ${layers:+--layers $layers} \
          > "$OUT/gpu_peer_$mode.log" 2>&1; then
        peer=$(sed -n 's/^RESULT tokens_per_s=\([0-9.]*\).*/\1/p' "$OUT/gpu_peer_$mode.log")
        ours=""
        [ $mode = fp32 ] && ours=$(tokens_per_s "$OUT/gpu_bench_fp32.md")
        [ $mode = tf32 ] && ours=$(tokens_per_s "$OUT/gpu_bench_tf32.md")
        ratio=""
        [ -n "$ours" ] && [ -n "$peer" ] && ratio="trlhpc/peer = $(awk -v a="$ours" -v b="$peer" 'BEGIN {printf "%.2f", a / b}')"
        row "gpu_peer $mode" "$peer tokens/s" "$ratio; gpu_peer_$mode.log"
      else
        row "gpu_peer $mode" FAILED "see gpu_peer_$mode.log"
      fi
    done
  else
    row gpu_peer skipped "python3 with torch (CUDA) and transformers not available"
  fi
fi

log "done (status $status); summary in $SUMMARY"
cat "$SUMMARY"
exit $status
