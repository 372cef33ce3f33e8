# Sourced by bench/gpu_check/run.sh: the stages that run the CUDA test binaries.
#   stage_op_tests   every cuda_test_* (tests/cuda: each op against the CPU op, the review's defects, the
#                    device communicators incl. NCCL at world size 1, the whole-model step GPU vs CPU),
#                    4 at a time; records op_tests, and model_step for cuda_test_model_step alone
#   stage_sanitizer  compute-sanitizer memcheck and racecheck on the attention, cross-entropy, embedding
#                    and RMSNorm tests, all eight at once; records sanitizer
# A test binary exits 77 when it sees no GPU (cuda_gtest_main.cpp): the dry run stops there.

# gtest_counts LOG: "P passed, F failed, S skipped"
gtest_counts() {
  echo "$(grep -c '^\[       OK \]' "$1") passed, $(grep -c '^\[  FAILED  \] .*(' "$1") failed, $(grep -c '^\[  SKIPPED \] .*(' "$1") skipped"
}

stage_op_tests() {
  local tests=("$PREFIX"/bin/cuda_test_*)
  if [ ! -e "${tests[0]}" ]; then
    record op_tests null "no cuda_test_* binaries (a build without CUDA?)"
    return 0
  fi
  if [ $DRY = 1 ]; then
    # Up to the first GPU call: one binary starts, finds no GPU and says so (exit 77).
    with_libs "${tests[0]}" > "$WORK/dry_test.log" 2>&1
    local rc=$?
    cat "$WORK/dry_test.log"
    record op_tests null "dry run: ${#tests[@]} CUDA test binaries; $(basename "${tests[0]}") started and exited $rc ($(grep -m1 -o 'no CUDA device visible[^)]*)' "$WORK/dry_test.log" || echo 'see op_tests.log')); skipped: running them"
    return 0
  fi
  local cap
  cap=$(budget 120)
  [ "$cap" = 0 ] && { record op_tests null "time budget spent"; return 0; }
  say "op tests: ${#tests[@]} binaries, 4 at a time, ${cap}s in all"
  mkdir -p "$WORK/tests"
  # Each binary gets what is left until the stage's deadline; one not started by then is recorded as 125.
  printf '%s\n' "${tests[@]}" | OMP_NUM_THREADS=4 xargs -P 4 -I{} bash -c \
    'n=$(basename {}); left=$(($1 - $(date +%s))); [ $left -lt 1 ] && { echo 125 > "$2/$n.rc"; touch "$2/$n.log"; exit 0; }
     LD_LIBRARY_PATH="$0" timeout $left {} --gtest_output=xml:"$2/$n.xml" > "$2/$n.log" 2>&1; echo $? > "$2/$n.rc"' \
    "$GPU_LIBRARY_PATH" "$(($(date +%s) + cap))" "$WORK/tests"
  local t n rc bad=() total=0 model_step=""
  for t in "${tests[@]}"; do
    n=$(basename "$t")
    rc=$(cat "$WORK/tests/$n.rc" 2> /dev/null || echo missing)
    echo "===== $n: exit $rc, $(gtest_counts "$WORK/tests/$n.log")"
    grep -E '^\[  (FAILED|SKIPPED) \]|Failure|error' "$WORK/tests/$n.log" | head -40
    total=$((total + $(grep -c '^\[       OK \]' "$WORK/tests/$n.log")))
    if [ "$rc" != 0 ] || [ "$(grep -c '^\[  SKIPPED \] .*(' "$WORK/tests/$n.log")" != 0 ]; then
      bad+=("$n (exit $rc$([ "$rc" = 124 ] && echo ', timed out')$([ "$rc" = 125 ] && echo ', not started: stage time spent'))")
    fi
    [ "$n" = cuda_test_model_step ] && model_step="$rc $(gtest_counts "$WORK/tests/$n.log")"
  done
  for t in "$WORK"/tests/*.log; do echo "===== full log $(basename "$t")"; cat "$t"; done
  if [ -n "$model_step" ]; then
    [ "${model_step%% *}" = 0 ] && record model_step true "cuda_test_model_step: ${model_step#* }" ||
      record model_step false "cuda_test_model_step exit ${model_step%% *}: ${model_step#* }"
  fi
  if [ ${#bad[@]} = 0 ]; then
    record op_tests true "${#tests[@]} binaries, $total cases passed, none skipped"
  else
    record op_tests false "${#bad[@]} of ${#tests[@]} binaries failed or skipped cases: ${bad[*]}"
  fi
}

stage_sanitizer() {
  local targets=(cuda_test_attention cuda_test_cross_entropy cuda_test_embedding cuda_test_rmsnorm)
  if ! command -v compute-sanitizer > /dev/null; then
    record sanitizer null "compute-sanitizer is not on PATH here"
    return 0
  fi
  if [ $DRY = 1 ]; then
    record sanitizer null "dry run: compute-sanitizer found ($(command -v compute-sanitizer)); skipped: memcheck/racecheck of ${targets[*]}"
    return 0
  fi
  local cap
  cap=$(budget 110)
  [ "$cap" = 0 ] && { record sanitizer null "time budget spent before compute-sanitizer"; return 0; }
  say "compute-sanitizer memcheck + racecheck on ${targets[*]}, all at once, ${cap}s"
  local tool t pids=()
  for tool in memcheck racecheck; do
    for t in "${targets[@]}"; do
      (with_libs timeout "$cap" compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 \
        "$PREFIX/bin/$t" > "$WORK/san_${tool}_$t.log" 2>&1; echo $? > "$WORK/san_${tool}_$t.rc") &
      pids+=($!)
    done
  done
  wait "${pids[@]}"
  local clean=0 dirty=() unfinished=() rc f
  for tool in memcheck racecheck; do
    for t in "${targets[@]}"; do
      f=$WORK/san_${tool}_$t
      rc=$(cat "$f.rc")
      echo "===== $tool $t: exit $rc; $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f.log")"
      cat "$f.log" | grep -v '^\[ *\(RUN\|OK\) *\]' | head -60
      if grep -q -E 'Device not supported|Unable to find injection|Target application returned an error' "$f.log" && [ "$rc" != 0 ] && [ "$rc" != 99 ]; then
        unfinished+=("$tool/$t (sanitizer could not run: $(grep -m1 -E 'Device not supported|Unable to find injection' "$f.log" | cut -c1-80))")
      elif [ "$rc" = 124 ]; then
        unfinished+=("$tool/$t (timed out)")
      elif [ "$rc" = 0 ] && grep -q -E '(ERROR|RACECHECK) SUMMARY: 0 ' "$f.log"; then
        clean=$((clean + 1))
      else
        dirty+=("$tool/$t (exit $rc: $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY|FAILED' "$f.log" | cut -c1-80))")
      fi
    done
  done
  if [ ${#dirty[@]} -gt 0 ]; then
    record sanitizer false "${#dirty[@]} of 8 runs report errors or failed: ${dirty[*]}${unfinished:+; unfinished: ${unfinished[*]}}"
  elif [ ${#unfinished[@]} -gt 0 ]; then
    record sanitizer null "$clean of 8 runs clean, ${#unfinished[@]} did not finish: ${unfinished[*]}"
  else
    record sanitizer true "memcheck and racecheck clean on ${targets[*]}"
  fi
}
