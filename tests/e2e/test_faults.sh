#!/usr/bin/env bash
# Surviving the cluster, end to end on the tiny-chat job (4 ranks unless said):
#  1. SIGUSR1 to one rank mid-training: every rank stops at the next step boundary, a checkpoint of the
#     steps done is written, exit 3 with the resume line; a second signal during that save changes
#     nothing; --resume_from_checkpoint latest finishes with the uninterrupted run's losses bit for bit.
#     The same with --async_save --save_steps 2: a save under way in the background is finished, the
#     stop's own checkpoint written, and the resumed run is bit-identical too.
#  2. SIGTERM to every rank while rank 0 tokenizes a large dataset (the tiny-chat rows x 50): the
#     tokenizing stops (no cache file is written), exit 3, nothing saved, no model written.
#  3. --learning_rate 1e30: exit 1, one message on every rank naming the step and the first parameter
#     with a non-finite gradient; no model.safetensors; the checkpoint of the last good step intact.
#     With --skip_nonfinite_steps the job finishes and metrics.jsonl counts skipped_steps.
#  4. A full disk (a 13 MB tmpfs, root only) while saving: exit 2 with the message, the earlier
#     checkpoint intact, `latest` naming it, no .tmp folder left; the same with --async_save (the
#     background write's failure ends the job at the next save).
# Every run has a timeout, so nothing can hang CI.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
SMALL=""
cleanup() {
  [ -n "$SMALL" ] && umount "$SMALL" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

sft() {  # sft NP OUT LOG FLAGS...
  local np=$1 out=$2 log=$3
  shift 3
  trlhpc_np 300 "$np" sft --config examples/tiny-chat/sft.yaml \
    --logging_steps 1 --eval_steps 0 --peak_flops 1e12 --output_dir "$out" "$@" >"$log" 2>&1
}
ranks_of() { pgrep -f "^$TRLHPC sft .*--output_dir $1( |$)"; }
losses() {  # losses METRICS: "step loss grad_norm" per training line
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "loss" in r: print(r["step"], repr(r["loss"]), repr(r["grad_norm"]))' "$1"
}

# 1. Preemption at a step boundary, a second signal during the save, resume.
sft 4 "$WORK/full" "$WORK/full.log" --max_steps 40 || fail "uninterrupted run: exit $?"
preempt_and_resume() {  # preempt_and_resume NAME FLAGS...
  local name=$1
  shift
  sft 4 "$WORK/$name" "$WORK/$name.log" --max_steps 40 "$@" &
  local job=$!
  for _ in $(seq 200); do grep -q '"step":5,' "$WORK/$name/metrics.jsonl" 2>/dev/null && break; sleep 0.05; done
  local pid
  pid=$(ranks_of "$WORK/$name" | tail -n1)
  kill -USR1 "$pid"
  for _ in $(seq 400); do ls -d "$WORK/$name"/checkpoint-*.tmp >/dev/null 2>&1 && break; sleep 0.005; done
  kill -USR1 "$pid" 2>/dev/null  # a second signal, while the checkpoint is written (or just after)
  wait $job
  local rc=$?
  [ $rc -eq 3 ] || { fail "$name: preempted job: exit $rc, want 3"; tail -5 "$WORK/$name.log"; }
  grep -q "stopped by SIGUSR1 after step [0-9]* of 40: checkpoint .*; resume with --resume_from_checkpoint latest" "$WORK/$name.log" ||
    fail "$name: preempted job: no stop line"
  local latest
  latest=$(cat "$WORK/$name/latest" 2>/dev/null)
  [ -f "$WORK/$name/$latest/manifest.json" ] || fail "$name: latest ($latest) is not a complete checkpoint"
  ls -d "$WORK/$name"/checkpoint-*.tmp >/dev/null 2>&1 && fail "$name: a .tmp folder remains"
  [ -f "$WORK/$name/model.safetensors" ] && fail "$name: preempted job wrote the final model"
  echo "$name: preempted after ${latest#checkpoint-} steps"
  sft 4 "$WORK/$name" "$WORK/$name-resumed.log" --max_steps 40 --resume_from_checkpoint latest "$@" || fail "$name: resume: exit $?"
  diff <(losses "$WORK/full/metrics.jsonl") <(losses "$WORK/$name/metrics.jsonl") >/dev/null ||
    fail "$name: preempted + resumed losses differ from the uninterrupted run"
  cmp -s "$WORK/full/model.safetensors" "$WORK/$name/model.safetensors" || fail "$name: preempted + resumed final model differs"
}
preempt_and_resume pre
preempt_and_resume pre-async --async_save --save_steps 2

# 2. A signal while the dataset is tokenized: nothing to save, and the tokenizing stops early.
for _ in $(seq 50); do cat examples/tiny-chat/train.jsonl; done >"$WORK/large.jsonl"
sft 4 "$WORK/early" "$WORK/early.log" --max_steps 40 --dataset_name "$WORK/large.jsonl" &
job=$!
# Signal once the rank has installed its handler (SigCgt has SIGTERM, bit 15): before that the
# default action would kill it, as for any program still starting up.
handles_term() { [ -n "$1" ] && (( 0x$(awk '/^SigCgt/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0) >> 14 & 1 )); }
pid=""
for _ in $(seq 2000); do
  pid=$(ranks_of "$WORK/early" | tail -n1)
  handles_term "$pid" && break
  sleep 0.005
done
sleep 0.3
kill -TERM $(ranks_of "$WORK/early")  # every rank, as SLURM signals every task
wait $job
rc=$?
[ $rc -eq 3 ] || { fail "signal while tokenizing: exit $rc, want 3"; tail -3 "$WORK/early.log"; }
grep -q "stopped by SIGTERM after step 0: no step to save" "$WORK/early.log" || fail "signal while tokenizing: no stop line"
grep -q "dataset cache written" "$WORK/early.log" && fail "signal while tokenizing: the tokenizing ran to its end"
ls "$WORK/early" | grep -q checkpoint && fail "signal while tokenizing: a checkpoint was written"
[ -f "$WORK/early/model.safetensors" ] && fail "signal while tokenizing: a model was written"

# 3. Non-finite steps.
sft 4 "$WORK/nan" "$WORK/nan.log" --max_steps 6 --learning_rate 1e30 --save_steps 1
rc=$?
[ $rc -eq 1 ] || fail "lr 1e30: exit $rc, want 1"
n=$(grep "trlhpc: error:" "$WORK/nan.log" | sort -u | wc -l)
[ "$n" -eq 1 ] || fail "lr 1e30: $n different error lines"
grep -q "trlhpc: error: step [0-9]*: loss .*first non-finite gradient: model\." "$WORK/nan.log" ||
  { fail "lr 1e30: the error does not name the step and parameter"; grep error "$WORK/nan.log" | head -2; }
[ "$(grep -c 'trlhpc: error:' "$WORK/nan.log")" -eq 4 ] || fail "lr 1e30: not every rank reported it"
[ -f "$WORK/nan/model.safetensors" ] && fail "lr 1e30: a model was saved"
latest=$(cat "$WORK/nan/latest" 2>/dev/null)
[ -f "$WORK/nan/$latest/manifest.json" ] || fail "lr 1e30: no intact checkpoint ($latest)"
sft 4 "$WORK/skip" "$WORK/skip.log" --max_steps 6 --learning_rate 1e30 --skip_nonfinite_steps || fail "skip: exit $?"
grep -q '"skipped_steps":[1-9]' "$WORK/skip/metrics.jsonl" || fail "skip: metrics.jsonl counts no skipped step"
grep -q "skipped: loss" "$WORK/skip.log" || fail "skip: no skip line in the log"

# 4. A full disk while saving (mounting a tmpfs needs root).
mkdir -p "$WORK/small"
if mount -t tmpfs -o size=13M tmpfs "$WORK/small" 2>/dev/null; then
  SMALL=$WORK/small
  for mode in sync async; do
    rm -rf "$SMALL/out"
    flags=()
    [ $mode = async ] && flags=(--async_save)
    sft 2 "$SMALL/out" "$WORK/full-disk-$mode.log" --max_steps 6 --save_steps 2 --dataset_cache_dir none "${flags[@]}"
    rc=$?
    [ $rc -eq 2 ] || { fail "full disk ($mode): exit $rc, want 2"; tail -3 "$WORK/full-disk-$mode.log"; }
    grep -q "disk full: the checkpoint of step 4 needs about .* --output_dir $SMALL/out" "$WORK/full-disk-$mode.log" ||
      fail "full disk ($mode): no message"
    [ -f "$SMALL/out/checkpoint-2/manifest.json" ] || fail "full disk ($mode): checkpoint-2 damaged"
    [ "$(cat "$SMALL/out/latest")" = "checkpoint-2" ] || fail "full disk ($mode): latest moved"
    ls -d "$SMALL"/out/checkpoint-*.tmp >/dev/null 2>&1 && fail "full disk ($mode): the .tmp folder was left"
  done
else
  echo "NOT RUN: the full-disk case (mounting a tmpfs needs root)"
fi

e2e_end
