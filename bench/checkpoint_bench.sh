#!/usr/bin/env bash
# Checkpoint write and read (parallel HDF5) at np = 1, 2, 4, one thread per rank: the Qwen2.5-0.5B-shaped
# model of checkpoint_bench under ZeRO-3. Builds nothing. Prints the markdown table for bench/RESULTS.md
# ("## Checkpoint write and read (parallel HDF5)").
#   bench/checkpoint_bench.sh [BUILD_DIR] [extra checkpoint_bench flags: --layers N --dir PATH --iters K --keep_cache]
# Each run writes one ~6 GB state.h5 at a time (24 layers) into a fresh folder under --dir (default
# /tmp), deleted before the next np.
set -euo pipefail
build=${1:-build}
shift || true
export OMP_NUM_THREADS=1
mpirun_flags=(--oversubscribe --bind-to none)
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
header=(--header)
for np in 1 2 4; do
  mpirun "${mpirun_flags[@]}" -np "$np" "$build/bench/checkpoint_bench" "${header[@]}" "$@"
  header=()
done
