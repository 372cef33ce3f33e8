#!/usr/bin/env bash
# `sbatch jobs/multinode.slurm` as shipped (2 nodes x 2 ranks x 1 CPU) trains the bundled default across
# two SLURM nodes, and its loss curve matches the same 4 ranks started by mpirun on one node (bound in
# tests/e2e/two_node_cluster.sh). In a checkout whose binary is build/trlhpc the job is given no TRLHPC,
# so it also shows the script's build/trlhpc fallback; no config is given (only flags), so the job takes
# the bundled default. Skipped (exit 77) without two idle SLURM nodes:
# `scripts/start-local-slurm.sh --nodes 2` makes them on one machine (root, network namespaces).
set -euo pipefail
if [[ -z ${TRLHPC_TWO_NODE_TEST_INNER:-} ]]; then
  TRLHPC_TWO_NODE_TEST_INNER=1 exec timeout 420 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
JOB=""
trap '[[ -n $JOB ]] && scancel "$JOB" 2>/dev/null; rm -rf "$WORK"' EXIT
source "$ROOT/tests/e2e/two_node_cluster.sh"  # after lib.sh: its skip and fatal
require_two_slurm_nodes
FLAGS=(--max_steps 8 --logging_steps 1 --eval_steps 0)

reference_run "$WORK/ref" "${FLAGS[@]}"

EXPORT=ALL
[[ $(realpath "$ROOT/build/trlhpc" 2>/dev/null) == "$TRLHPC" ]] || EXPORT=ALL,TRLHPC=$TRLHPC
JOB=$(cd "$ROOT" && env -u TRLHPC sbatch --parsable --chdir="$ROOT" --output="$WORK/job.out" --time=5 --export="$EXPORT" \
  jobs/multinode.slurm "${FLAGS[@]}" --output_dir "$WORK/job")
echo "job $JOB (--export=$EXPORT)"
# scontrol's JobState, not an empty squeue (which a slurmctld timeout also gives).
ended=0
for _ in $(seq 300); do
  scontrol show job "$JOB" 2>/dev/null | grep -Eq "JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)" &&
    { ended=1; break; }
  sleep 1
done
((ended)) || { squeue -j "$JOB" -o '%i %T %r'; fatal "job $JOB still queued or running after 300 s"; }
JOB_DONE=$JOB; JOB=""
cat "$WORK/job.out"
grep -q "^trlhpc: job $JOB_DONE on .*: 4 ranks x 1 threads" "$WORK/job.out" || fatal "the job did not start 4 ranks x 1 thread (see above)"
grep -q "dp_shard 4" "$WORK/job.out" || fatal "the job's log does not show 'dp_shard 4': the ranks did not form one world"
[[ $EXPORT == ALL ]] && { grep -q "build/trlhpc, config examples/tiny-chat/sft.yaml" "$WORK/job.out" || fatal "the job did not fall back to build/trlhpc"; }
[[ -s $WORK/job/model.safetensors ]] || fatal "the job saved no model"
nodes=$(sed -n "s/^trlhpc: job $JOB_DONE on \([^:]*\):.*/\1/p" "$WORK/job.out" | head -n1)
[[ $(scontrol show hostnames "$nodes" | sort -u | wc -l) -eq 2 ]] || fatal "the job ran on '$nodes', not two nodes"
compare_losses "$WORK/ref/metrics.jsonl" "$WORK/job/metrics.jsonl" || fatal "the two-node loss curve differs from one node's"
echo "PASSED: sbatch jobs/multinode.slurm on $nodes matches the one-node loss curve"
e2e_end
