#!/usr/bin/env bash
# transformers' best-model selection end to end (train/best_model.hpp) on the tiny-chat model. The expected
# checkpoints are recomputed here from the run's own metrics.jsonl with transformers' rules
# (Trainer._determine_best_metric: a strict improvement; _save_checkpoint: the best checkpoint is the
# checkpoint of the best step, when one was saved; _rotate_checkpoints: the newest and the best survive
# --save_total_limit; the end of train(): under limit 1 only the best checkpoint stays), and the final
# model must be byte for byte `trlhpc export` of the best checkpoint.
# --greater_is_better true on eval_loss makes the best an early step, so the final model is not simply
# the last step's.
#   A: --save_strategy best, eval every step: a checkpoint at each new best; limit 1 keeps the last of them.
#   B: --save_strategy steps every 2, eval every 2, limit 2: the best checkpoint and the newest remain.
#   C: B with limit 1: during training the best and the newest, at the end only the best, and `latest`
#      names it.
# Refusals (transformers' own checks) on 2 ranks alike, before training.
source "$(dirname "$0")/lib.sh"
set -u
e2e_begin "$@"

TINY=(--model_config examples/tiny-chat/config.json --tokenizer examples/tiny-chat
      --dataset_name examples/tiny-chat/train.jsonl --eval_dataset examples/tiny-chat/eval.jsonl
      --dataset_cache_dir none --max_length 128 --learning_rate 3e-3 --logging_steps 1 --per_device_eval_batch_size 4)
# expected NAME SAVE_EVERY LIMIT: "<best checkpoint step or none> <checkpoint steps left, ascending>" by transformers'
# rules, from the run's eval losses (greater is better); SAVE_EVERY 0: save_strategy best.
expected() {
  python3 - "$WORK/$1/metrics.jsonl" "$2" "$3" <<'PY'
import json, sys
evals = [(l["step"], l["eval_loss"]) for l in map(json.loads, open(sys.argv[1])) if "eval_loss" in l and l["step"] > 0]
every, limit = int(sys.argv[2]), int(sys.argv[3])
best, best_step, best_ckpt, saved = None, None, None, []
for step, value in evals:
    improved = best is None or value > best
    if improved:
        best, best_step = value, step
    if (every == 0 and improved) or (every > 0 and step % every == 0):
        saved.append(step)
        if best_step == step:
            best_ckpt = step
        # _rotate_checkpoints: _sorted_checkpoints moves the best to the second newest place, limit 1
        # becomes 2 while the best is not the newest, the oldest go first.
        order = sorted(saved)
        if best_ckpt in order:
            for i in range(order.index(best_ckpt), len(order) - 2):
                order[i], order[i + 1] = order[i + 1], order[i]
        keep = 2 if limit == 1 and best_ckpt is not None and order[-1] != best_ckpt else limit
        saved = order[max(0, len(order) - keep):]
if limit == 1 and best_ckpt is not None:  # the end of train(): "Delete the last checkpoint when save_total_limit=1"
    saved = [best_ckpt]
print(best_ckpt if best_ckpt is not None else "none", *sorted(saved))
PY
}
left() { (cd "$WORK/$1" && ls -d checkpoint-* 2>/dev/null | sed 's/checkpoint-//' | sort -n | tr '\n' ' ' | sed 's/ $//'); }

timeout 300 "$TRLHPC" sft "${TINY[@]}" --output_dir "$WORK/a" --max_steps 4 --eval_strategy steps --eval_steps 1 \
  --save_strategy best --metric_for_best_model eval_loss --greater_is_better true --load_best_model_at_end \
  --save_total_limit 1 > "$WORK/a.log" 2>&1
rc=$?
check "A: save_strategy best trains (exit $rc)" "$rc"
[ "$rc" -eq 0 ] || sed 's/^/    /' "$WORK/a.log" | tail -8
read -r best_a want_a <<< "$(expected a 0 1)"
check "A: checkpoints left '$(left a)' = transformers' '$want_a'" $([ -n "$want_a" ] && [ "$(left a)" = "$want_a" ]; echo $?)
check "A: the best is not the last step (best $best_a)" $([ "$best_a" != none ] && [ "$best_a" != 4 ]; echo $?)
check "A: the load is logged" $(grep -q "loaded the best model from $WORK/a/checkpoint-$best_a (eval_loss " "$WORK/a.log"; echo $?)
timeout 120 "$TRLHPC" export "$WORK/a/checkpoint-$best_a" --output_dir "$WORK/a_best" > "$WORK/a_export.log" 2>&1
check "A: the final model is the best checkpoint's, byte for byte" \
  $(cmp -s "$WORK/a/model.safetensors" "$WORK/a_best/model.safetensors"; echo $?)

timeout 300 "$TRLHPC" sft "${TINY[@]}" --output_dir "$WORK/b" --max_steps 6 --eval_strategy steps --eval_steps 2 \
  --save_strategy steps --save_steps 2 --greater_is_better true --load_best_model_at_end --save_total_limit 2 \
  > "$WORK/b.log" 2>&1
rc=$?
check "B: save_strategy steps with load_best_model_at_end trains (exit $rc)" "$rc"
[ "$rc" -eq 0 ] || sed 's/^/    /' "$WORK/b.log" | tail -8
read -r best_b want_b <<< "$(expected b 2 2)"
check "B: checkpoints left '$(left b)' = transformers' '$want_b' (best $best_b kept past the limit)" \
  $([ -n "$want_b" ] && [ "$(left b)" = "$want_b" ]; echo $?)
if [ "$best_b" != none ]; then
  timeout 120 "$TRLHPC" export "$WORK/b/checkpoint-$best_b" --output_dir "$WORK/b_best" > "$WORK/b_export.log" 2>&1
  check "B: the final model is checkpoint-$best_b's" $(cmp -s "$WORK/b/model.safetensors" "$WORK/b_best/model.safetensors"; echo $?)
fi
timeout 120 "$TRLHPC" export "$WORK/b/checkpoint-6" --output_dir "$WORK/b_last" > "$WORK/b_export6.log" 2>&1
check "B: ... and not the last step's" \
  $([ "$best_b" != 6 ] && ! cmp -s "$WORK/b/model.safetensors" "$WORK/b_last/model.safetensors"; echo $?)

timeout 300 "$TRLHPC" sft "${TINY[@]}" --output_dir "$WORK/c" --max_steps 6 --eval_strategy steps --eval_steps 2 \
  --save_strategy steps --save_steps 2 --greater_is_better true --load_best_model_at_end --save_total_limit 1 \
  > "$WORK/c.log" 2>&1
rc=$?
check "C: limit 1 trains (exit $rc)" "$rc"
read -r best_c want_c <<< "$(expected c 2 1)"
check "C: checkpoints left at the end '$(left c)' = transformers' '$want_c'" \
  $([ "$best_c" != none ] && [ "$(left c)" = "$want_c" ] && [ "$want_c" = "$best_c" ]; echo $?)
check "C: the last step's checkpoint was deleted at the end, and said so" \
  $([ "$best_c" = 6 ] || grep -q "deleted $WORK/c/checkpoint-6 at the end" "$WORK/c.log"; echo $?)
check "C: latest names checkpoint-$best_c" $([ "$(cat "$WORK/c/latest" 2>/dev/null)" = "checkpoint-$best_c" ]; echo $?)

# transformers' checks, on 2 ranks alike.
timeout 120 "$MPIRUN" --oversubscribe -np 2 "$TRLHPC" sft "${TINY[@]}" --output_dir "$WORK/mismatch" --max_steps 2 \
  --load_best_model_at_end --save_strategy epoch > "$WORK/mismatch.log" 2>&1
rc=$?
check "load_best_model_at_end with save epoch / eval steps refused on 2 ranks (exit $rc)" \
  $([ "$rc" -eq 1 ] && [ "$(grep -c "error: --load_best_model_at_end requires the save and eval strategy to match" "$WORK/mismatch.log")" -eq 2 ]; echo $?)
timeout 120 "$MPIRUN" --oversubscribe -np 2 "$TRLHPC" sft "${TINY[@]}" --output_dir "$WORK/nometric" --max_steps 2 \
  --save_strategy best > "$WORK/nometric.log" 2>&1
rc=$?
check "save_strategy best without a metric refused on 2 ranks (exit $rc)" \
  $([ "$rc" -eq 1 ] && [ "$(grep -c "error: --save_strategy best: --metric_for_best_model must be provided" "$WORK/nometric.log")" -eq 2 ]; echo $?)
e2e_end
