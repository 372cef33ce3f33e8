#!/usr/bin/env bash
# Data-parallel profiles on this machine, one thread per rank, the ~20M-parameter model of dp_bench.
# Prints the markdown table for bench/RESULTS.md.
#   bench/dp_bench.sh [BUILD_DIR] [extra dp_bench flags...]
# Environment: SHARDINGS (default "none zero3"), NPS (default "1 2"), PROGRESS (default "none"), e.g.
#   SHARDINGS="none zero2 zero3" NPS="2 4" PROGRESS="none thread" bench/dp_bench.sh build --steps 10
# for the "Communication overlap (issue 17)" table.
set -euo pipefail
build=${1:-build}
shift || true
export OMP_NUM_THREADS=1
mpirun_flags=(--oversubscribe --bind-to none)
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "| profile | progress | ranks | params | tokens/s per rank (median) | (best step) | T_self ms | T_dist ms | alone ms | wait ms | skew ms | hidden | exposed ms | MiB per rank (p+g+o) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for sharding in ${SHARDINGS:-none zero3}; do
  for np in ${NPS:-1 2}; do
    for progress in ${PROGRESS:-none}; do
      mpirun "${mpirun_flags[@]}" -np "$np" "$build/bench/dp_bench" --sharding "$sharding" --comm_progress "$progress" "$@"
    done
  done
done
