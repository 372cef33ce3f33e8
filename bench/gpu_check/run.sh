#!/usr/bin/env bash
# `bench/gpu_check.sh run [--dry-run] [--bin BUILD_DIR]`: the one-shot H200 check, on the GPU machine, from
# the .gpu/ folder that `prepare` packed (docs/GPU-CHECK.md). Writes $OUT/summary.md, $OUT/h200.json and one
# log per stage (setup, op_tests, curves, benchmark, layouts, sanitizer: the device tool returns at most 8
# files). Every stage runs under its own timeout inside a total budget (GPU_CHECK_BUDGET_S, default 390 s,
# so that the whole command ends inside 7 minutes); a stage the budget no longer allows is recorded as not
# run, with the reason. Exit 0 when no stage that ran failed.
#   --dry-run   this machine: every stage up to its first GPU call (unpack, ldd, the CPU reference curves,
#               the comparisons on CPU-vs-CPU curves, the peer's CPU self-check at a tiny shape), saying
#               what it skipped; h200.json's fields stay null
#   --bin DIR   take trlhpc and gpu_bench from a build folder instead of unpacking .gpu/ (with --dry-run:
#               the stage logic without a prepared .gpu/, as the ctest e2e.test_gpu_check does)
# Environment: OUT (default a new /tmp folder), GPU_CHECK_BUDGET_S, GPU_CHECK_STEPS (default 30),
# GPU_CHECK_WORK (scratch folder, kept), GPU_CHECK_ALL_LAYOUTS=1 (dry run: all 10 layouts on the CPU),
# LAYOUT_BOUND (default 1e-4), GPU_PACK (default .gpu), GPU_CHECK_PEER_ENV (dry run: VAR=VALUE ... for the
# peer's python3 alone).
set -u -o pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PACK=${GPU_PACK:-$ROOT/.gpu}
DRY=0
BIN_DIR=""
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --bin) BIN_DIR=$(cd "$2" && pwd) || exit 2; shift ;;
    *) echo "gpu_check run: unknown argument '$1' (usage: run [--dry-run] [--bin BUILD_DIR])" >&2; exit 2 ;;
  esac
  shift
done
OUT=${OUT:-$(mktemp -d /tmp/gpu_check_out.XXXXXX)}
mkdir -p "$OUT"
if [ -n "${GPU_CHECK_WORK:-}" ]; then  # kept afterwards (the ctest reads the dry run's curves from it)
  WORK=$GPU_CHECK_WORK
  mkdir -p "$WORK"
else
  WORK=$(mktemp -d /tmp/gpu_check_work.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
fi
RESULTS=$WORK/results.jsonl
: > "$RESULTS"
BUDGET_S=${GPU_CHECK_BUDGET_S:-390}
[ $DRY = 1 ] && BUDGET_S=${GPU_CHECK_BUDGET_S:-900}  # two shared cores here, no 7-minute lease
START_S=$(date +%s)
REPORT=(python3 "$HERE/report.py")
. "$HERE/runtime_env.sh"
. "$HERE/stages_tests.sh"
. "$HERE/stages_training.sh"

say() { echo "[gpu_check $(date +%H:%M:%S)] $*"; }
# record NAME OK DETAIL [K=V...]: one stage outcome (OK true|false|null); GPU outcomes fill h200.json.
record() {
  local name=$1 ok=$2 detail=$3
  shift 3
  local gpu=() v=()
  [ $DRY = 0 ] && gpu=(--gpu)
  for kv in "$@"; do v+=(--value "$kv"); done
  "${REPORT[@]}" record --results "$RESULTS" --name "$name" --ok "$ok" --detail "$detail" "${gpu[@]}" "${v[@]}"
  say "$name: $([ "$ok" = true ] && echo pass || { [ "$ok" = false ] && echo FAIL || echo 'not run'; }) $detail"
}
# budget CAP: seconds a stage may take now: min(CAP, what is left of the budget); 0 when under 15 s are left.
budget() {
  local left=$((BUDGET_S - ($(date +%s) - START_S)))
  [ "$left" -lt 15 ] && { echo 0; return; }
  [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}

# ---- setup: the binaries, the libraries, the GPU ---------------------------------------------------------------
PREFIX=$WORK/prefix
DATA=$PACK/data
setup() {
  if [ -n "$BIN_DIR" ]; then
    mkdir -p "$PREFIX/bin"
    for b in trlhpc bench/gpu_bench; do [ -x "$BIN_DIR/$b" ] && ln -sf "$BIN_DIR/$b" "$PREFIX/bin/"; done
    for b in "$BIN_DIR"/tests/cuda_test_*; do [ -x "$b" ] && ln -sf "$b" "$PREFIX/bin/"; done
    export GPU_LIBRARY_PATH="" GPU_MPIRUN=${MPIRUN:-mpirun} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    if [ ! -f "$DATA/c4_text.jsonl" ]; then  # no .gpu/data: ../shared/data's files under the same names
      local shared=${SHARED_DATA:-$ROOT/../shared/data}
      [ -f "$shared/datasets/c4_text.jsonl" ] || { record setup false "no $DATA and no $shared/datasets (set SHARED_DATA)"; return 1; }
      mkdir -p "$WORK/data"
      ln -sfn "$shared/stories260K" "$WORK/data/stories260K"
      ln -sf "$shared/datasets/c4_text.jsonl" "$WORK/data/"
      DATA=$WORK/data
    fi
    record setup true "binaries from $BIN_DIR (no unpack, no ldd check); data from $DATA"
    return 0
  fi
  [ -f "$PACK/bin.tar.xz" ] || { record setup false "no $PACK/bin.tar.xz: run 'bench/gpu_check.sh prepare' first (and carry .gpu)"; return 1; }
  say "manifest: $(head -1 "$PACK/MANIFEST.txt")"
  gpu_unpack "$PACK" "$PREFIX" || { record setup false "unpacking $PACK failed (see setup.log)"; return 1; }
  gpu_env "$PREFIX"
  echo "GPU_LIBRARY_PATH=$GPU_LIBRARY_PATH"
  local missing
  if ! missing=$(gpu_ldd_check "$PREFIX"); then
    record setup false "missing libraries: $missing"
    return 1
  fi
  if [ $DRY = 0 ] && ! with_libs ldconfig -p 2> /dev/null | grep -q 'libcuda\.so\.1' && [ ! -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ]; then
    say "note: libcuda.so.1 (the driver) is not in ldconfig's cache; the binaries will look for it on LD_LIBRARY_PATH"
  fi
  with_libs "$GPU_MPIRUN" --version 2>&1 | head -1
  echo "CUDA libraries trlhpc loads:"
  with_libs ldd "$PREFIX/bin/trlhpc" | grep -E 'libcuda|cudart|cublas|cudnn|nccl'
  # The relocation took: Open MPI reports the unpacked plugin folder, not /usr's.
  local pkglib
  pkglib=$(with_libs "$PREFIX/root/usr/bin/ompi_info" --path pkglibdir 2>&1 | sed -n 's/.*Pkglibdir: *//p')
  echo "ompi_info: Pkglibdir $pkglib"
  [ "$pkglib" = "$OPAL_PKGLIBDIR" ] || { record setup false "Open MPI is not relocated: ompi_info reports Pkglibdir '$pkglib', not $OPAL_PKGLIBDIR"; return 1; }
  with_libs "$PREFIX/bin/trlhpc" env 2>&1 | head -20
  record setup true "unpacked $(ls "$PACK"/debs/*.deb | wc -l) packages and $(ls "$PREFIX"/bin | wc -l) binaries; ldd: every library found ($(head -1 "$PACK/MANIFEST.txt"))"
}

{
  say "gpu_check run$([ $DRY = 1 ] && echo ' --dry-run') from $ROOT, out $OUT, budget ${BUDGET_S}s"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || echo "nvidia-smi: not available"
  command -v compute-sanitizer || echo "compute-sanitizer: not on PATH"
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.cuda.is_available())' 2>&1 | tail -1
  setup
} > "$OUT/setup.log" 2>&1
setup_ok=$?
tail -1 "$OUT/setup.log"
if [ $setup_ok = 0 ]; then
  stage_op_tests > "$OUT/op_tests.log" 2>&1
  stage_curves > "$OUT/curves.log" 2>&1
  stage_benchmark > "$OUT/benchmark.log" 2>&1
  stage_layouts > "$OUT/layouts.log" 2>&1
  stage_sanitizer > "$OUT/sanitizer.log" 2>&1
  stage_attention_choice >> "$OUT/benchmark.log" 2>&1  # opportunistic: the time left after all the above
fi
commit=$(head -1 "$PACK/MANIFEST.txt" 2> /dev/null | sed 's/^commit: //')
[ -n "$commit" ] || commit="$(git -C "$ROOT" rev-parse HEAD 2> /dev/null) (working tree; no .gpu manifest)"
dry=()
[ $DRY = 1 ] && dry=(--dry_run)
"${REPORT[@]}" summarize --results "$RESULTS" --out "$OUT" --commit "$commit" "${dry[@]}"
say "total $(($(date +%s) - START_S)) s; results in $OUT"
! grep -q '"ok": false' "$RESULTS"
