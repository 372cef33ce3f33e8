#!/usr/bin/env bash
# trlhpc launched by SLURM instead of mpirun: `srun -n2` ranks must find each other through PMIx
# (world size 2, mesh dp_shard 2), train 4 steps and save the model; `trlhpc env --json` under srun
# reports world size 2; `sbatch --wait jobs/single-node.slurm` completes. Skipped (exit 77) when no
# SLURM is reachable or no node is idle: scripts/start-local-slurm.sh starts a one-node cluster (root).
set -euo pipefail
if [[ -z ${TRLHPC_SRUN_TEST_INNER:-} ]]; then
  TRLHPC_SRUN_TEST_INNER=1 exec timeout 300 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

for tool in srun sinfo sbatch; do command -v "$tool" >/dev/null || skip "$tool not found (no SLURM client installed)"; done
sinfo -h >/dev/null 2>&1 || skip "sinfo cannot reach a SLURM controller ($(sinfo -h 2>&1 | tail -n1))"
IDLE=$(sinfo -h -t idle -o '%n %c' 2>/dev/null | awk '$2 >= 2 {print $1; exit}')
[[ -n $IDLE ]] || skip "no idle SLURM node with >= 2 CPUs (sinfo: $(sinfo -h -o '%n %t %c' | tr '\n' ' '))"
MPI_LIST=$(srun --mpi=list 2>&1 || true)
MPI=pmix
grep -qw pmix <<<"$MPI_LIST" || skip "srun has no pmix plugin (srun --mpi=list: $(tr '\n' ' ' <<<"$MPI_LIST")); OpenMPI ranks cannot wire up under srun"

echo "node $IDLE, srun --mpi=$MPI"

# 1. world size through PMIx.
srun -N1 -n2 --mpi=$MPI --time=5 "$TRLHPC" env --json >"$WORK/env.json" 2>"$WORK/env.err" \
  || { cat "$WORK/env.err"; fatal "srun -n2 trlhpc env --json exited non-zero"; }
python3 - "$WORK/env.json" <<'PY' || { cat "$WORK/env.err"; fatal "trlhpc env under srun -n2 does not see world size 2"; }
import json, sys
text = open(sys.argv[1]).read()
obj, _ = json.JSONDecoder().raw_decode(text.lstrip())
print("env --json under srun: world_size", obj["world_size"], "mesh dp_shard", obj["mesh"]["dp_shard"])
sys.exit(0 if obj["world_size"] == 2 else 1)
PY

# 2. a short training run.
OUT=$WORK/out
srun -N1 -n2 --mpi=$MPI --time=5 "$TRLHPC" sft --config examples/tiny-chat/sft.yaml --max_steps 4 \
  --logging_steps 2 --output_dir "$OUT" >"$WORK/sft.log" 2>&1 || { cat "$WORK/sft.log"; fatal "srun -n2 trlhpc sft exited non-zero"; }
cat "$WORK/sft.log"
grep -q "dp_shard 2" "$WORK/sft.log" || fatal "the log does not show 'dp_shard 2': the srun ranks did not form one world"
grep -q '"step":4' "$OUT/metrics.jsonl" || fatal "metrics.jsonl has no step 4"
[[ -s $OUT/model.safetensors ]] || fatal "no model.safetensors in $OUT"

# 3. the batch script.
JOB_OUT=$WORK/job
sbatch --wait --chdir="$ROOT" --output="$WORK/job.out" --time=5 --export=ALL,TRLHPC="$TRLHPC" \
  jobs/single-node.slurm examples/tiny-chat/sft.yaml --max_steps 2 --logging_steps 1 --output_dir "$JOB_OUT" \
  >"$WORK/sbatch.txt" 2>&1 || { cat "$WORK/sbatch.txt" "$WORK/job.out" 2>/dev/null; fatal "sbatch --wait jobs/single-node.slurm failed"; }
cat "$WORK/sbatch.txt" "$WORK/job.out"
grep -q "dp_shard 2" "$WORK/job.out" || fatal "the batch job's log does not show 'dp_shard 2'"
grep -q '"step":2' "$JOB_OUT/metrics.jsonl" || fatal "the batch job's metrics.jsonl has no step 2"
[[ -s $JOB_OUT/model.safetensors ]] || fatal "the batch job saved no model.safetensors"
echo "PASSED: srun and sbatch launch trlhpc with world size 2"
e2e_end
