#!/usr/bin/env bash
# `trlhpc sft --tp_size 2 --tp_sequence_parallel` on the bundled tiny-chat job (2 ranks, real tokenizer,
# chat template, packing) trains to the losses of --tp_size 2 without it: packed rows, padding-free rows
# (one row of all the micro-batch's tokens, padded by the job to a multiple of tp, 2 micro-batches per
# step) and eval. The mesh line names the mode. Bound: 1e-5 relative per logged loss (fp32 summation order only; measured
# differences are printed).
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

run() {  # run NAME FLAGS...: one 2-rank tp 2 run, log in $WORK/NAME.log, metrics in $WORK/NAME/metrics.jsonl
  local name=$1
  shift
  trlhpc_np 300 2 sft --config examples/tiny-chat/sft.yaml \
    --tp_size 2 --max_steps 6 --logging_steps 1 --eval_steps 3 --output_dir "$WORK/$name" "$@" >"$WORK/$name.log" 2>&1
  local rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name: exit $rc"; sed 's/^/    /' "$WORK/$name.log" | tail -20; fi
}

close_losses() {  # close_losses A B: same steps, every loss / eval_loss within 1e-5 relative
  same_metrics "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" 1e-5 loss eval_loss
}

# padding_free also accumulates 2 micro-batches per step (the norm gradients, summed over tp for each
# micro-batch, must not be summed again).
for mode in packed padding_free; do
  extra=()
  [ "$mode" = padding_free ] && extra=(--padding_free --gradient_accumulation_steps 2)
  run "$mode" "${extra[@]}"
  run "$mode.sp" "${extra[@]}" --tp_sequence_parallel
  if [ ! -f "$WORK/$mode/metrics.jsonl" ] || [ ! -f "$WORK/$mode.sp/metrics.jsonl" ]; then
    fail "$mode: a run wrote no metrics.jsonl"
    continue
  fi
  grep -q "tp 2 (sequence parallel)" "$WORK/$mode.sp.log" || fail "$mode: the mesh line does not name sequence parallel"
  echo "$mode: tp 2 vs tp 2 + --tp_sequence_parallel"
  close_losses "$mode" "$mode.sp" || fail "$mode: losses differ"
done

e2e_end
