#!/usr/bin/env bash
# TRL's arguments end to end (docs/guide/trl-arguments.md): a YAML with every field of TRL 1.16's
# dataclasses at its default (tests/fixtures/trl_fields.json, as TRL writes a config out) trains the
# tiny-chat model, with TRL flags on the command line on top: logging_first_step logs step 1,
# save_strategy no writes no checkpoint although --save_steps asks for one, a mapped flag prints its note
# once, an older spelling (--max_seq_length) is read, eval_on_start evaluates at step 0,
# cosine_with_min_lr follows transformers' formula. A refused value stops 2 ranks alike, before training.
source "$(dirname "$0")/lib.sh"
set -u
e2e_begin "$@"

python3 - "$ROOT/tests/fixtures/trl_fields.json" > "$WORK/trl_defaults.yaml" <<'PY'
import json, sys
for field in json.load(open(sys.argv[1]))["fields"]:
    print(f"{field['name']}: {json.dumps(field['default'])}")  # JSON values are YAML flow scalars
PY
check "the YAML has every field" $([ "$(wc -l < "$WORK/trl_defaults.yaml")" -ge 163 ]; echo $?)

TINY=(--model_config examples/tiny-chat/config.json --tokenizer examples/tiny-chat
      --dataset_name examples/tiny-chat/train.jsonl --eval_dataset examples/tiny-chat/eval.jsonl
      --assistant_only_loss --dataset_cache_dir none --gradient_checkpointing false)
timeout 300 "$TRLHPC" sft --config "$WORK/trl_defaults.yaml" "${TINY[@]}" --output_dir "$WORK/run" \
  --max_seq_length 128 --max_steps 5 --logging_steps 3 --logging_first_step --eval_strategy steps --eval_steps 5 \
  --per_device_eval_batch_size 3 --eval_on_start --save_steps 2 --save_strategy no --attn_implementation flash_attention_2 \
  > "$WORK/run.log" 2>&1
rc=$?
check "a TRL default YAML trains (exit $rc)" "$rc"
[ "$rc" -eq 0 ] || sed 's/^/    /' "$WORK/run.log" | tail -20
steps=$(python3 -c "
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
print(' '.join(str(l['step']) for l in lines if 'loss' in l and 'eval_loss' not in l))" "$WORK/run/metrics.jsonl" 2>/dev/null)
check "logging_first_step: train lines at steps 1 3 5 (got '$steps')" $([ "$steps" = "1 3 5" ]; echo $?)
check "save_strategy no: no checkpoint" $(ls -d "$WORK"/run/checkpoint-* >/dev/null 2>&1; [ $? -ne 0 ]; echo $?)
evals=$(python3 -c "
import json, sys
print(' '.join(str(l['step']) for l in map(json.loads, open(sys.argv[1])) if 'eval_loss' in l))" "$WORK/run/metrics.jsonl" 2>/dev/null)
check "eval_on_start: eval lines at steps 0 5 (got '$evals')" $([ "$evals" = "0 5" ]; echo $?)
check "the mapped flag's note, once" $([ "$(grep -c "note: --attn_implementation 'flash_attention_2'" "$WORK/run.log")" -eq 1 ]; echo $?)
check "the older spelling's note" $(grep -q "note: --max_seq_length" "$WORK/run.log"; echo $?)

# Epoch strategies: 12 rows, 2 per step = 6 steps per epoch, 2 epochs: train lines and checkpoints after
# steps 6 and 12; logging_strategy no: no train lines at all.
head -n 12 examples/tiny-chat/train.jsonl > "$WORK/small.jsonl"
SMALL=(--model_config examples/tiny-chat/config.json --tokenizer examples/tiny-chat --dataset_name "$WORK/small.jsonl"
       --dataset_cache_dir none --max_length 128 --per_device_train_batch_size 2 --num_train_epochs 2)
timeout 300 "$TRLHPC" sft "${SMALL[@]}" --output_dir "$WORK/epoch" --logging_strategy epoch --save_strategy epoch \
  > "$WORK/epoch.log" 2>&1
steps=$(python3 -c "
import json, sys
print(' '.join(str(l['step']) for l in map(json.loads, open(sys.argv[1])) if 'loss' in l))" "$WORK/epoch/metrics.jsonl" 2>/dev/null)
check "logging_strategy epoch: train lines at 6 12 (got '$steps')" $([ "$steps" = "6 12" ]; echo $?)
saved=$(cd "$WORK/epoch" 2>/dev/null && ls -d checkpoint-* | tr '\n' ' ')
check "save_strategy epoch: checkpoint-12 checkpoint-6 (got '$saved')" $([ "$saved" = "checkpoint-12 checkpoint-6 " ]; echo $?)
timeout 300 "$TRLHPC" sft "${SMALL[@]}" --output_dir "$WORK/nolog" --logging_strategy no > "$WORK/nolog.log" 2>&1
rc=$?
check "logging_strategy no: exit 0 and no train lines (exit $rc)" \
  $([ "$rc" -eq 0 ] && ! grep -q '"loss"' "$WORK/nolog/metrics.jsonl" 2>/dev/null; echo $?)

# cosine_with_min_lr (transformers' formula): 4 steps from 1e-3, min_lr_rate 0.5; the 4th step uses
# 1e-3 * (0.5 * (1 + cos(pi * 3/4)) * 0.5 + 0.5) = 5.7322330e-4.
timeout 300 "$TRLHPC" sft "${TINY[@]}" --output_dir "$WORK/minlr" --max_length 128 --max_steps 4 --logging_steps 1 \
  --learning_rate 1e-3 --lr_scheduler_type cosine_with_min_lr --lr_scheduler_kwargs '{"min_lr_rate": 0.5}' \
  > "$WORK/minlr.log" 2>&1
lr=$(python3 -c "
import json, sys
print([json.loads(l) for l in open(sys.argv[1]) if '\"loss\"' in l][-1]['learning_rate'])" "$WORK/minlr/metrics.jsonl" 2>/dev/null)
check "cosine_with_min_lr: step 4's lr 5.7322330e-4 (got $lr)" \
  $(python3 -c "import sys; sys.exit(abs(float('${lr:-0}') - 5.7322330470336313e-4) > 1e-12)"; echo $?)

# --deepspeed ds.json: ZeRO stage 2 on 2 ranks, as --accelerate_config zero2 would.
printf '{"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "AdamW"}}\n' \
  > "$WORK/ds.json"
timeout 300 "$MPIRUN" --oversubscribe --bind-to none -np 2 "$TRLHPC" sft "${TINY[@]}" --output_dir "$WORK/ds" \
  --max_length 128 --max_steps 2 --deepspeed "$WORK/ds.json" > "$WORK/ds.log" 2>&1
rc=$?
check "--deepspeed stage 2 trains as zero2 (exit $rc)" $([ "$rc" -eq 0 ] && grep -q "sharding zero2" "$WORK/ds.log"; echo $?)
[ "$rc" -eq 0 ] || sed 's/^/    /' "$WORK/ds.log" | tail -5

# Refused values: exit 1 with the message on every rank, before any collective.
timeout 120 "$MPIRUN" --oversubscribe -np 2 "$TRLHPC" sft "${TINY[@]}" --output_dir "$WORK/fp16" --fp16 \
  > "$WORK/fp16.log" 2>&1
rc=$?
check "--fp16 refused on 2 ranks (exit $rc)" $([ "$rc" -eq 1 ] && [ "$(grep -c "error: --fp16 'true': fp16 is not supported: use --bf16" "$WORK/fp16.log")" -eq 2 ]; echo $?)
printf 'max_steps: 2\npush_to_hub: true\n' > "$WORK/push.yaml"
timeout 120 "$MPIRUN" --oversubscribe -np 2 "$TRLHPC" sft "${TINY[@]}" --output_dir "$WORK/push" --config "$WORK/push.yaml" \
  > "$WORK/push.log" 2>&1
rc=$?
check "push_to_hub true refused naming file:line on 2 ranks (exit $rc)" \
  $([ "$rc" -eq 1 ] && [ "$(grep -c "push.yaml:2: --push_to_hub 'true': no network on compute nodes" "$WORK/push.log")" -eq 2 ]; echo $?)
[ "$rc" -eq 1 ] || sed 's/^/    /' "$WORK/push.log" | tail -5
timeout 120 "$MPIRUN" --oversubscribe -np 2 "$TRLHPC" sft "${TINY[@]}" --output_dir "$WORK/nominlr" \
  --lr_scheduler_type cosine_with_min_lr > "$WORK/nominlr.log" 2>&1
rc=$?
check "cosine_with_min_lr without min_lr_rate refused on 2 ranks (exit $rc)" \
  $([ "$rc" -eq 1 ] && [ "$(grep -c "error: --lr_scheduler_type cosine_with_min_lr needs --lr_scheduler_kwargs" "$WORK/nominlr.log")" -eq 2 ]; echo $?)
e2e_end
