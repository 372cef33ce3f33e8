#!/usr/bin/env bash
# TrainingArguments' save_only_model end to end (train/checkpoint/checkpoint.hpp) on the bundled tiny-chat
# job, 2 ranks, ZeRO-3 (every rank writes its shard): with --save_only_model a checkpoint's state.h5 holds the
# params datasets only (no exp_avg / exp_avg_sq, the AdamW moments; its manifest says save_only_model and has
# no optimizer step or sampler position), it is smaller (about a third), the training and the final
# model.safetensors are the default run's byte for byte, --async_save writes the same, `trlhpc export` of
# it gives the default checkpoint's model byte for byte, and resuming from it (by folder or latest) stops both ranks, exit 1, with a message
# naming the option and what to do, before training. The default checkpoint still holds the moments.
source "$(dirname "$0")/lib.sh"
set -u
e2e_begin "$@"

run() {  # run OUT FLAGS...: 2 ranks, 6 steps, a checkpoint after steps 3 and 6
  local out=$1
  shift
  timeout 300 "$MPIRUN" --oversubscribe --bind-to none -np 2 "$TRLHPC" sft --config examples/tiny-chat/sft.yaml \
    --max_steps 6 --logging_steps 1 --eval_steps 3 --peak_flops 1e12 --dataset_cache_dir none --sharding zero3 \
    --save_steps 3 --output_dir "$out" "$@" >"$out.log" 2>&1
}

run "$WORK/full"
check "the default run trains (exit $?)" $?
run "$WORK/model_only" --save_only_model
rc=$?
check "a --save_only_model run trains (exit $rc)" "$rc"
[ "$rc" -eq 0 ] || tail -5 "$WORK/model_only.log" | sed 's/^/    /'

full="$WORK/full/checkpoint-3" only="$WORK/model_only/checkpoint-3"
check "the default checkpoint holds the AdamW moments" $(grep -aq "exp_avg_sq" "$full/state.h5"; echo $?)
check "the model-only checkpoint holds none" $(! grep -aq "exp_avg" "$only/state.h5"; echo $?)
python3 - "$full/manifest.json" "$only/manifest.json" <<'PY'
import json, sys
full, only = (json.load(open(p)) for p in sys.argv[1:])
assert "save_only_model" not in full and "sampler" in full and "optimizer_step" in full, "the default manifest changed"
assert only["save_only_model"] is True and "sampler" not in only and "optimizer_step" not in only, only.keys()
assert set(only["datasets"]) == {d for d in full["datasets"] if d.startswith("params/")}, sorted(only["datasets"])
assert all(set(t["checksums"]) == {"params"} for t in only["tensors"].values())
assert all(only["tensors"][n]["checksums"]["params"] == t["checksums"]["params"] for n, t in full["tensors"].items())
PY
check "the manifests: params only, the same params checksums" $?
size_full=$(stat -c %s "$full/state.h5") size_only=$(stat -c %s "$only/state.h5")
check "smaller: $size_only bytes against $size_full (under 40 %)" $([ $((size_only * 100)) -lt $((size_full * 40)) ]; echo $?)
check "the same curve" $(cmp -s <(grep -o '"loss":[^,]*' "$WORK/full/metrics.jsonl") \
  <(grep -o '"loss":[^,]*' "$WORK/model_only/metrics.jsonl"); echo $?)
check "the same final model.safetensors" $(cmp -s "$WORK/full/model.safetensors" "$WORK/model_only/model.safetensors"; echo $?)

# The background saver (--async_save) writes the same model-only checkpoint.
run "$WORK/model_only_async" --save_only_model --async_save true
check "an --async_save --save_only_model run trains (exit $?)" $?
python3 - "$only/manifest.json" "$WORK/model_only_async/checkpoint-3/manifest.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert b.get("save_only_model") is True and a["datasets"] == b["datasets"] and a["tensors"] == b["tensors"]
PY
check "... with the same params datasets and checksums" $?

# Used as a model: export gives the default checkpoint's model.
for kind in full model_only; do
  timeout 120 "$MPIRUN" --oversubscribe --bind-to none -np 2 "$TRLHPC" export "$WORK/$kind/checkpoint-3" \
    --output_dir "$WORK/export_$kind" >"$WORK/export_$kind.log" 2>&1
  check "export of the $kind checkpoint (exit $?)" $?
done
check "the model-only export = the default one" \
  $(cmp -s "$WORK/export_full/model.safetensors" "$WORK/export_model_only/model.safetensors"; echo $?)

# Resuming is refused, the same way on both ranks, before training.
for from in "$only" latest; do
  run "$WORK/model_only" --max_steps 9 --resume_from_checkpoint "$from"
  rc=$?
  check "resume from $from: exit 1 (got $rc)" $([ "$rc" -eq 1 ]; echo $?)
  check "... naming --save_only_model and what to do" \
    $([ "$(grep -c "saved with --save_only_model true, it holds the model only.*trlhpc export" "$WORK/model_only.log")" -ge 1 ]; echo $?)
  check "... before training" $(! grep -q "^step 4" "$WORK/model_only.log"; echo $?)
done
run "$WORK/full" --max_steps 9 --resume_from_checkpoint latest
check "the default checkpoint still resumes (exit $?)" $?

e2e_end
