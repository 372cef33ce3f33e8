#!/usr/bin/env bash
# A preempted SLURM job finishes on its own: `sbatch jobs/single-node.slurm` trains with --save_steps;
# `scancel --signal=USR1` (what --signal=USR1@120 does before a time limit) makes every rank write a
# checkpoint and exit 3; the script requeues the job, the requeued run resumes from that checkpoint
# (--resume_from_checkpoint auto) and trains to the end. Skipped (exit 77) without a reachable SLURM
# with an idle node: scripts/start-local-slurm.sh starts a one-node cluster (root).
set -euo pipefail
if [[ -z ${TRLHPC_REQUEUE_TEST_INNER:-} ]]; then
  TRLHPC_REQUEUE_TEST_INNER=1 exec timeout 600 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
for tool in sbatch squeue scancel sinfo; do command -v "$tool" >/dev/null || skip "$tool not found (no SLURM client installed)"; done
sinfo -h >/dev/null 2>&1 || skip "sinfo cannot reach a SLURM controller"
[[ -n $(sinfo -h -t idle -o '%n %c' 2>/dev/null | awk '$2 >= 2 {print $1; exit}') ]] || skip "no idle SLURM node with >= 2 CPUs"
JOB=""
trap '[[ -n $JOB ]] && scancel "$JOB" 2>/dev/null; rm -rf "$WORK"' EXIT
OUT=$WORK/out

JOB=$(sbatch --parsable --chdir="$ROOT" --open-mode=append --output="$WORK/job.out" --time=8 \
  --export=ALL,TRLHPC="$TRLHPC" jobs/single-node.slurm examples/tiny-chat/sft.yaml --max_steps 120 \
  --logging_steps 10 --eval_steps 0 --save_steps 25 --output_dir "$OUT")
echo "job $JOB"
for _ in $(seq 240); do grep -q '"step":30' "$OUT/metrics.jsonl" 2>/dev/null && break; sleep 0.5; done
grep -q '"step":30' "$OUT/metrics.jsonl" || { cat "$WORK/job.out"; fatal "the job did not reach step 30"; }
scancel --signal=USR1 "$JOB"
# scontrol's JobState, not an empty squeue (which a slurmctld timeout also gives): a final state after
# the requeue (Restarts >= 1), or one seen on 5 polls in a row (a job that was never requeued).
# SLURM holds a requeued job for about two minutes (Reason=BeginTime) before it may start again; that
# wait is SLURM's, not trlhpc's, so once the node is idle the test releases it (StartTime=now), as
# test_two_node_requeue.sh does.
finals=0
released=0
held_since=0
for _ in $(seq 500); do
  info=$(scontrol show job "$JOB" 2>/dev/null)
  if grep -Eq "JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)" <<<"$info"; then
    finals=$((finals + 1))
    { grep -q "Restarts=[1-9]" <<<"$info" || ((finals >= 5)); } && break
  else
    finals=0
  fi
  if (( !released )) && grep -q "JobState=PENDING" <<<"$info" && grep -q "Reason=BeginTime" <<<"$info"; then
    (( held_since )) || held_since=$SECONDS
    busy=$(sinfo -h -N -o '%t' 2>/dev/null | grep -cv '^idle' || true)
    if (( SECONDS - held_since >= 3 )) && [[ $busy == 0 ]]; then
      scontrol update JobId="$JOB" StartTime=now && released=1 && echo "released the requeued job from SLURM's requeue hold"
    fi
  fi
  sleep 1
done
cat "$WORK/job.out" | grep -v '^step'
grep -q "stopped by SIGUSR1 after step" "$WORK/job.out" || fatal "no rank reported the preemption"
grep -q "requeueing job $JOB" "$WORK/job.out" || fatal "the script did not requeue the job"
grep -q "resumed from .*checkpoint-[0-9]* after step" "$WORK/job.out" || fatal "the requeued run did not resume"
grep -q '"step":120' "$OUT/metrics.jsonl" || fatal "the requeued run did not finish (no step 120)"
[[ -s $OUT/model.safetensors ]] || fatal "no final model"
JOB=""
echo "PASSED: preempted, requeued, resumed and finished"
e2e_end
