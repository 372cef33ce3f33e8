#!/usr/bin/env bash
# `trlhpc sft --comm_progress thread` (the default) and `--comm_progress none` on the bundled tiny-chat job
# (2 ranks, DDP and ZeRO-3) log bitwise the same losses, gradient norms and eval losses: the progress thread
# changes only when MPI's operations advance, never what they compute. Neither run warns about a fallback
# (the MPI here provides MPI_THREAD_MULTIPLE), and a misspelt mode is refused naming the flag.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

run() {  # run NAME FLAGS...: one 2-rank run, log in $WORK/NAME.log, metrics in $WORK/NAME/metrics.jsonl
  local name=$1
  shift
  trlhpc_np 300 2 sft --config examples/tiny-chat/sft.yaml \
    --max_steps 6 --logging_steps 1 --eval_steps 3 --output_dir "$WORK/$name" "$@" >"$WORK/$name.log" 2>&1
  local rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name: exit $rc"; sed 's/^/    /' "$WORK/$name.log" | tail -20; fi
}

same_numbers() {  # same_numbers A B: the same loss / grad_norm / eval_loss values, as logged (bitwise)
  same_metrics "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" 0 loss grad_norm eval_loss
}

for sharding in none zero3; do
  run "$sharding.none" --sharding "$sharding" --comm_progress none
  run "$sharding.thread" --sharding "$sharding"  # the default: thread
  if [ ! -f "$WORK/$sharding.none/metrics.jsonl" ] || [ ! -f "$WORK/$sharding.thread/metrics.jsonl" ]; then
    fail "$sharding: a run wrote no metrics.jsonl"
    continue
  fi
  grep -q "comm_progress" "$WORK/$sharding.thread.log" && fail "$sharding: unexpected --comm_progress warning: $(grep comm_progress "$WORK/$sharding.thread.log")"
  echo "$sharding: --comm_progress none vs thread"
  same_numbers "$sharding.none" "$sharding.thread" || fail "$sharding: numbers differ"
done

trlhpc_np 120 2 sft --config examples/tiny-chat/sft.yaml \
  --max_steps 1 --output_dir "$WORK/bad" --comm_progress always >"$WORK/bad.log" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "--comm_progress always: exit $rc, want 1"
grep -q -- "--comm_progress always" "$WORK/bad.log" || fail "--comm_progress always: the error does not name the flag"

e2e_end
