#!/usr/bin/env bash
# The one-shot check of the CUDA backend on a lent H200 (docs/GPU-CHECK.md):
#   bench/gpu_check.sh prepare            here: build for sm_90, pack binaries + runtime .debs + data into .gpu/
#   bench/gpu_check.sh run [--dry-run]    there (device tool: carry [".gpu"]): unpack, ldd, the stages, in
#                                         under 7 minutes; $OUT/summary.md and $OUT/h200.json
# `run --dry-run` here goes as far as the first GPU call and says what it skipped.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
verb=${1:-}
[ $# -gt 0 ] && shift
case $verb in
  prepare) exec bash "$HERE/gpu_check/prepare.sh" "$@" ;;
  run) exec bash "$HERE/gpu_check/run.sh" "$@" ;;
  *) echo "usage: bench/gpu_check.sh prepare | run [--dry-run] [--bin BUILD_DIR]   (docs/GPU-CHECK.md)" >&2; exit 2 ;;
esac
