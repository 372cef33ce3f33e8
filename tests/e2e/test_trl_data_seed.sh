#!/usr/bin/env bash
# TrainingArguments' data_seed end to end (SftConfig::data_seed) on the bundled tiny-chat job without
# packing (so each step's token count shows which rows the sampler drew), 2 ranks: as in transformers,
# data_seed seeds the sampler only, --seed the rest (model init; TRL's packing shuffle).
#   --data_seed 42 (= --seed), and --data_seed null: the default run's curve bit for bit;
#   --data_seed 7: another data order (other per-step token counts, another loss curve);
#   --data_seed 7 --seed 43: the same data order as --data_seed 7 (the same token counts) but another
#     model init (another loss at step 1);
#   a checkpoint of a --data_seed 7 run resumes with --data_seed 7 (the uninterrupted curve bit for
#     bit) and is refused, exit 1, naming the data order, with --data_seed 8 or without it.
source "$(dirname "$0")/lib.sh"
set -u
e2e_begin "$@"

run() {  # run OUT FLAGS...: 2 ranks, 6 steps
  local out=$1
  shift
  timeout 300 "$MPIRUN" --oversubscribe --bind-to none -np 2 "$TRLHPC" sft --config examples/tiny-chat/sft.yaml \
    --packing false --max_length 256 --max_steps 6 --logging_steps 1 --eval_steps 3 --peak_flops 1e12 \
    --dataset_cache_dir none --output_dir "$out" "$@" >"$out.log" 2>&1
}
# column FILE KEY: the train lines' KEY values, one line
column() {
  python3 -c "
import json, sys
print(' '.join(repr(r[sys.argv[2]]) for r in map(json.loads, open(sys.argv[1])) if 'loss' in r and 'eval_loss' not in r))" \
    "$1/metrics.jsonl" "$2" 2>/dev/null
}

for name in default:"" same:"--data_seed 42" null:"--data_seed null" seven:"--data_seed 7" \
            seven_seed43:"--data_seed 7 --seed 43"; do
  # shellcheck disable=SC2086
  run "$WORK/${name%%:*}" ${name#*:}
  check "${name%%:*} trains (exit $?)" $?
done
check "--data_seed 42 = --seed 42: the default curve" $([ -n "$(column "$WORK/default" loss)" ] &&
  [ "$(column "$WORK/default" loss)" = "$(column "$WORK/same" loss)" ] &&
  cmp -s "$WORK/default/model.safetensors" "$WORK/same/model.safetensors"; echo $?)
check "--data_seed null: the default curve" $([ "$(column "$WORK/default" loss)" = "$(column "$WORK/null" loss)" ]; echo $?)
check "--data_seed 7: another data order" \
  $([ "$(column "$WORK/default" num_tokens)" != "$(column "$WORK/seven" num_tokens)" ] &&
    [ "$(column "$WORK/default" loss)" != "$(column "$WORK/seven" loss)" ]; echo $?)
check "--data_seed 7 --seed 43: the data order of --data_seed 7" \
  $([ -n "$(column "$WORK/seven" num_tokens)" ] &&
    [ "$(column "$WORK/seven" num_tokens)" = "$(column "$WORK/seven_seed43" num_tokens)" ]; echo $?)
check "... and another model init" \
  $([ "$(column "$WORK/seven" loss | cut -d' ' -f1)" != "$(column "$WORK/seven_seed43" loss | cut -d' ' -f1)" ]; echo $?)

# Resume: the sampler's seed is part of what a checkpoint must match.
run "$WORK/ckpt" --data_seed 7 --save_steps 3
check "a --data_seed 7 run saving at step 3 (exit $?)" $?
cp -r "$WORK/ckpt" "$WORK/ckpt_bad"
for bad in "--data_seed 8" ""; do
  # shellcheck disable=SC2086
  run "$WORK/ckpt_bad" --resume_from_checkpoint "$WORK/ckpt/checkpoint-3" $bad
  rc=$?
  check "resume with '${bad:-no --data_seed}': exit 1 (got $rc)" $([ "$rc" -eq 1 ] &&
    grep -q "another data order than the checkpoint" "$WORK/ckpt_bad.log"; echo $?)
done
rm -rf "$WORK/ckpt/checkpoint-6"
run "$WORK/ckpt" --data_seed 7 --save_steps 3 --resume_from_checkpoint "$WORK/ckpt/checkpoint-3"
check "resume with --data_seed 7 (exit $?)" $?
check "... gives the uninterrupted curve" $([ "$(column "$WORK/seven" loss)" = "$(column "$WORK/ckpt" loss)" ]; echo $?)

e2e_end
