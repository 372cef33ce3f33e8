#!/usr/bin/env bash
# A preempted two-node job finishes on its own with the loss of an uninterrupted run:
# `sbatch jobs/multinode.slurm` (2 nodes x 2 ranks) trains; `scancel --signal=USR1` (what
# --signal=USR1@120 does before a time limit) reaches the ranks on both nodes, which write a checkpoint
# and exit 3 (no --save_steps, so that checkpoint is the only one: a save across the namespace nodes
# takes ~25 s on a loaded 2-core machine); the script requeues the job, the requeued run resumes from
# that checkpoint and trains to the end. Its loss curve (every step, the final one included) matches
# the same 4 ranks run uninterrupted by mpirun on one node (bound in tests/e2e/two_node_cluster.sh; a
# same-layout resume is exact). Skipped (exit 77) without two idle SLURM nodes:
# `scripts/start-local-slurm.sh --nodes 2` makes them on one machine (root, network namespaces).
set -euo pipefail
if [[ -z ${TRLHPC_TWO_NODE_TEST_INNER:-} ]]; then
  TRLHPC_TWO_NODE_TEST_INNER=1 exec timeout 600 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
JOB=""
trap '[[ -n $JOB ]] && scancel "$JOB" 2>/dev/null; rm -rf "$WORK"' EXIT
source "$ROOT/tests/e2e/two_node_cluster.sh"  # after lib.sh: its skip and fatal
require_two_slurm_nodes
STEPS=40
PREEMPT_AFTER=12
FLAGS=(--max_steps "$STEPS" --logging_steps 1 --eval_steps 0)
OUT=$WORK/out

reference_run "$WORK/ref" "${FLAGS[@]}"

JOB=$(sbatch --parsable --chdir="$ROOT" --open-mode=append --output="$WORK/job.out" --time=8 \
  --export=ALL,TRLHPC="$TRLHPC" jobs/multinode.slurm examples/tiny-chat/sft.yaml "${FLAGS[@]}" \
  --output_dir "$OUT")
echo "job $JOB"
for _ in $(seq 1200); do grep -q "\"step\":$PREEMPT_AFTER," "$OUT/metrics.jsonl" 2>/dev/null && break; sleep 0.25; done
grep -q "\"step\":$PREEMPT_AFTER," "$OUT/metrics.jsonl" || { cat "$WORK/job.out"; fatal "the job did not reach step $PREEMPT_AFTER"; }
scancel --signal=USR1 "$JOB"
# SLURM holds a requeued job for a fixed 120 s (squeue reason BeginTime) before it may start again; the
# test releases it early to keep CI short (a real job just starts 2 minutes later). Not at once: slurmd
# revokes the killed run's job credential with a time stamp in whole seconds, and a relaunch of the same
# job id within that second, or onto a node still completing the old run, can fail to launch (the job
# then ends FAILED without running its script: seen once in CI). So: both nodes idle, and 3 s after the
# hold was first seen.
released=0
held_since=0
# What SLURM says about the job and its nodes, for a failure message.
slurm_diagnostics() {
  echo "--- scontrol show job $1"; scontrol show job "$1" 2>&1 || true
  echo "--- sinfo"; sinfo -N 2>&1 || true
  local log
  for log in /var/log/slurm/slurmctld.log /var/log/slurm/slurmd-*.log; do
    [[ -r $log ]] && { echo "--- $log (lines naming job $1)"; grep -E "JobId=$1([^0-9]|$)|\\[$1\\.|job $1([^0-9]|$)" "$log" | tail -n 15; }
  done
  return 0
}
done_state=""
# Wait on scontrol's JobState, not on an empty squeue: squeue prints nothing on an error too (a busy
# slurmctld timing out), which once ended this wait before the requeued run had started. Done = a final
# state after a restart, or a final state seen on 5 polls in a row (a job that was never requeued).
finals=0
for _ in $(seq 400); do
  info=$(scontrol show job "$JOB" 2>/dev/null)
  state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$info" | head -n1)
  case $state in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
      finals=$((finals + 1))
      if grep -q "Restarts=[1-9]" <<<"$info" || ((finals >= 5)); then done_state=$state; break; fi ;;
    *) finals=0 ;;
  esac
  if (( !released )) && [[ $state == PENDING ]] && grep -q "Reason=BeginTime" <<<"$info"; then
    (( held_since )) || held_since=$SECONDS
    busy=$(sinfo -h -N -o '%t' 2>/dev/null | grep -cv '^idle' || true)
    if (( SECONDS - held_since >= 3 )) && [[ $busy == 0 ]]; then
      scontrol update JobId="$JOB" StartTime=now && released=1 && echo "released the requeued job from SLURM's requeue hold"
    fi
  fi
  sleep 1
done
echo "job $JOB ended: ${done_state:-still queued or running}"
[[ -n $done_state ]] || { cat "$WORK/job.out"; slurm_diagnostics "$JOB"; fatal "job $JOB still queued or running after 400 s"; }
JOB_DONE=$JOB; JOB=""
grep -v '^step' "$WORK/job.out"
[[ $done_state == COMPLETED ]] || slurm_diagnostics "$JOB_DONE"
grep -q "stopped by SIGUSR1 after step" "$WORK/job.out" || fatal "no rank reported the preemption"
[[ $(grep -c "^trlhpc: job $JOB_DONE on .*: 4 ranks" "$WORK/job.out") -eq 2 ]] || fatal "the job did not run twice on 4 ranks"
grep -q "requeueing job $JOB_DONE" "$WORK/job.out" || fatal "the script did not requeue the job"
grep -q "resumed from .*checkpoint-[0-9]* after step" "$WORK/job.out" || fatal "the requeued run did not resume"
grep -q "\"step\":$STEPS," "$OUT/metrics.jsonl" || fatal "the requeued run did not finish (no step $STEPS)"
[[ -s $OUT/model.safetensors ]] || fatal "no final model"
compare_losses "$WORK/ref/metrics.jsonl" "$OUT/metrics.jsonl" || fatal "the preempted and requeued run's losses differ from an uninterrupted run's"
echo "PASSED: a two-node job preempted, requeued, resumed and finished with the uninterrupted loss"
e2e_end
