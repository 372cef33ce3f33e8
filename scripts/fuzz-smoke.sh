#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang 14 (ASan + UBSan, in $FUZZ_BUILD_DIR, default
# build-fuzz) and, for each target: replays its committed corpus (tests/fuzz/corpus/<target>/), then
# fuzzes it for FUZZ_SECONDS (default 25) starting from that corpus. Fails on any crash, uncaught
# exception, sanitizer report, input slower than FUZZ_TIMEOUT seconds (default 10) or process above
# FUZZ_RSS_MB (default 2560) / single allocation above FUZZ_MALLOC_MB (default 1024).
# Findings are written to $FUZZ_BUILD_DIR/fuzz-findings/<target>-crash-... (reproduce: <binary> <file>).
# New inputs the fuzzer finds go to $FUZZ_BUILD_DIR/fuzz-work/<target>/, never into the source tree.
#   FUZZ_TARGETS="fuzz_dataset fuzz_safetensors"  limits the run to some targets.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${FUZZ_BUILD_DIR:-build-fuzz}"
SECONDS_EACH="${FUZZ_SECONDS:-25}"
TIMEOUT="${FUZZ_TIMEOUT:-10}"
RSS_MB="${FUZZ_RSS_MB:-2560}"
MALLOC_MB="${FUZZ_MALLOC_MB:-1024}"
JOBS="${JOBS:-$(nproc)}"

if ! command -v clang++-14 >/dev/null; then
  echo "fuzz-smoke: clang-14 is missing; installing it (Debian package clang-14)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-14 >/tmp/trlhpc-apt-clang.log 2>&1 ||
    { echo "fuzz-smoke: could not install clang-14 (see /tmp/trlhpc-apt-clang.log)" >&2; exit 1; }
fi
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$BUILD" -DTRLHPC_FUZZ=ON -DTRLHPC_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    ${CMAKE_ARGS:-} >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS" --target fuzz_targets

targets="${FUZZ_TARGETS:-$(cd tests/fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//')}"
mkdir -p "$BUILD/fuzz-findings"
# OpenMPI's and HDF5's start-up allocations are not ours; leaks of trlhpc objects are still reported
# because LeakSanitizer runs at exit of every target.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=()
for t in $targets; do
  bin="$BUILD/tests/fuzz/$t"
  corpus="tests/fuzz/corpus/$t"
  work="$BUILD/fuzz-work/$t"
  mkdir -p "$work"
  flags=(-timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" -malloc_limit_mb="$MALLOC_MB"
         -artifact_prefix="$BUILD/fuzz-findings/$t-" -print_final_stats=0)
  [ -f "tests/fuzz/$t.dict" ] && flags+=(-dict="tests/fuzz/$t.dict")
  echo "== $t: replaying $(find "$corpus" -type f | wc -l) corpus inputs"
  if ! find "$corpus" -type f -print0 | xargs -0 -r "$bin" "${flags[@]}" -runs=1 >"$BUILD/fuzz-findings/$t.replay.log" 2>&1; then
    echo "FAIL $t: a committed corpus input fails (log: $BUILD/fuzz-findings/$t.replay.log)"; tail -30 "$BUILD/fuzz-findings/$t.replay.log"
    failed+=("$t"); continue
  fi
  echo "== $t: fuzzing for ${SECONDS_EACH}s"
  if ! "$bin" "${flags[@]}" -max_total_time="$SECONDS_EACH" "$work" "$corpus" >"$BUILD/fuzz-findings/$t.log" 2>&1; then
    echo "FAIL $t (log: $BUILD/fuzz-findings/$t.log)"; grep -E "ERROR|SUMMARY|Test unit written|runtime error|terminate" "$BUILD/fuzz-findings/$t.log" | head -20
    failed+=("$t"); continue
  fi
  grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs" "$BUILD/fuzz-findings/$t.log" | tail -1 || true
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz-smoke: FAILED: ${failed[*]}"; exit 1
fi
echo "fuzz-smoke: all targets clean"
