#!/usr/bin/env bash
# Context parallel (ring attention) and Ulysses (sp) at cp/sp = 1, 2, 4, and the cp 2 x sp 2 hybrid,
# on one 4096-token row, one thread per rank. Prints the markdown table for bench/RESULTS.md
# ("## Context and sequence parallel (this machine)").
#   bench/cp_bench.sh [BUILD_DIR] [extra cp_bench flags...]
# Environment: MODES (default "cp sp"), NPS (default "1 2 4"), PROGRESS (default "none"), HYBRID (default 1),
# e.g. for the "Communication overlap (issue 17)" table:
#   MODES=cp NPS="2 4" PROGRESS="none thread" HYBRID=0 bench/cp_bench.sh build
set -euo pipefail
build=${1:-build}
shift || true
export OMP_NUM_THREADS=1
mpirun_flags=(--oversubscribe --bind-to none)
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "| layout | progress | T | attention fwd+bwd s | attention CPU s/rank | attention tok/s | step s | step CPU s/rank | step tok/s | ring alone ms | ring wait ms | ring skew ms | ring time hidden | ring bytes hidden | pairs skipped |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for mode in ${MODES:-cp sp}; do
  for np in ${NPS:-1 2 4}; do
    for progress in ${PROGRESS:-none}; do
      mpirun "${mpirun_flags[@]}" -np "$np" "$build/bench/cp_bench" --mode "$mode" --comm_progress "$progress" "$@"
    done
  done
done
if [ "${HYBRID:-1}" = 1 ]; then
  mpirun "${mpirun_flags[@]}" -np 4 "$build/bench/cp_bench" --mode hybrid "$@"  # cp 2 x sp 2
fi
