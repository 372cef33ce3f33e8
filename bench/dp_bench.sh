#!/usr/bin/env bash
# Weak scaling of DDP and ZeRO-3 on this machine: np = 1 and 2, one thread per rank, the ~20M-parameter
# model of dp_bench. Prints the markdown table for bench/RESULTS.md ("## Data parallel (this machine)").
#   bench/dp_bench.sh [BUILD_DIR] [extra dp_bench flags...]
set -euo pipefail
build=${1:-build}
shift || true
export OMP_NUM_THREADS=1
mpirun_flags=(--oversubscribe --bind-to none)
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
echo "| profile | ranks | params | tokens/s per rank (median) | (best step) | T_self ms | T_dist ms | T_comm ms | exposed ms | grad_wait ms | hidden | MiB per rank (p+g+o) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for sharding in none zero3; do
  for np in 1 2; do
    mpirun "${mpirun_flags[@]}" -np "$np" "$build/bench/dp_bench" --sharding "$sharding" "$@"
  done
done
