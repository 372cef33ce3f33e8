#!/usr/bin/env bash
# TRL's dataset_num_proc, eos_token and pad_token end to end on the TRL curve fixture (fp32_jsonl setting):
#  1. --dataset_num_proc 3 writes the byte-identical dataset cache file of 1 thread, and trains the same curve
#     (every logged loss, grad_norm, entropy, accuracy equal);
#  2. an --eos_token / --pad_token not in the vocabulary stops a 2-rank run before training with one error
#     naming the option and the token (exit 1, no step);
#  3. --eos_token of the vocabulary trains (exit 0).
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
FIXTURE=tests/fixtures/trl_curves
source tests/e2e/trl_curves_lib.sh
# trl_curves_lib's settings with the assistant-only loss (the fixture's fp32_jsonl setting)
SETTINGS=("${SETTINGS[@]/--assistant_only_loss=false/--assistant_only_loss=true}")
DATA=$FIXTURE/conversations.jsonl

cached() {  # cached NAME [FLAGS...]: 1 rank with a dataset cache of its own in $WORK/NAME.cache
  local name=$1
  shift
  timeout 300 "$TRLHPC" sft --model_name_or_path "$FIXTURE/model" --dataset_name "$DATA" "${SETTINGS[@]}" \
    --shuffle_dataset false --dataset_cache_dir "$WORK/$name.cache" --output_dir "$WORK/$name" "$@" \
    >"$WORK/$name.log" 2>&1 || { fail "$name: exit $?"; tail -5 "$WORK/$name.log"; }
}
cached one_thread
cached three_threads --dataset_num_proc 3
a=$(ls "$WORK"/one_thread.cache/* 2>/dev/null | head -1)
b=$(ls "$WORK"/three_threads.cache/* 2>/dev/null | head -1)
[ -n "$a" ] && [ -n "$b" ] && [ "$(basename "$a")" = "$(basename "$b")" ] || fail "cache files: '$a' '$b'"
cmp -s "$a" "$b" || fail "--dataset_num_proc 3 wrote another cache file than 1 thread"
python3 - "$WORK/one_thread/metrics.jsonl" "$WORK/three_threads/metrics.jsonl" <<'PY' || fail "--dataset_num_proc 3 changed the curve"
import json, sys
keys = ("step", "loss", "grad_norm", "entropy", "mean_token_accuracy", "num_tokens")
runs = [[{k: l.get(k) for k in keys} for l in map(json.loads, open(p)) if "loss" in l] for p in sys.argv[1:]]
assert len(runs[0]) == 10 and runs[0] == runs[1], runs
print(f"    {len(runs[0])} steps equal")
PY

for option in eos_token pad_token; do
  timeout 120 "$MPIRUN" --oversubscribe --bind-to none -np 2 "$TRLHPC" sft --model_name_or_path "$FIXTURE/model" \
    --dataset_name "$DATA" "${SETTINGS[@]}" --dataset_cache_dir none --output_dir "$WORK/bad_$option" \
    --$option '<no_such_token>' >"$WORK/bad_$option.log" 2>&1
  rc=$?
  [ "$rc" -eq 1 ] || fail "--$option unknown: exit $rc (want 1)"
  grep -q -- "--$option '<no_such_token>' is not in the vocabulary" "$WORK/bad_$option.log" ||
    { fail "--$option unknown: no error naming it"; tail -3 "$WORK/bad_$option.log"; }
  ! grep -q '"step"' "$WORK/bad_$option/metrics.jsonl" 2>/dev/null || fail "--$option unknown: it trained"
done
sft eos_im_start "$DATA" --eos_token '<|im_start|>' --max_steps 3
e2e_end
