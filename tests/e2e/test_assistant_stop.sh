#!/usr/bin/env bash
# --assistant_only_loss with a chat template WITHOUT {% generation %} markers (the bundled template with
# its markers removed: the same text): trlhpc trains each assistant message's content and the
# end-of-turn token after it (<|im_end|>), says so once in the log, and the fine-tuned model stops: greedy
# generation of the first turn of 6 eval conversations ends on <|im_end|> (finish_reason "stop") well
# before --max_new_tokens. Trained on content alone the model would never see <|im_end|> as a target
# (user turns are masked), so it could not learn to stop.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
python3 - "$WORK/plain.jinja" <<'PY'
import json, sys
t = json.load(open("examples/tiny-chat/tokenizer_config.json"))["chat_template"]
assert "{% generation %}" in t
open(sys.argv[1], "w").write(t.replace("{% generation %}", "").replace("{% endgeneration %}", ""))
PY
trlhpc_np 600 2 sft --config examples/tiny-chat/sft.yaml \
  --chat_template_path "$WORK/plain.jinja" --max_steps 100 --eval_steps 0 --logging_steps 50 --peak_flops 1e12 \
  --dataset_cache_dir none --output_dir "$WORK/out" >"$WORK/sft.log" 2>&1 || { fail "sft: exit $?"; tail -5 "$WORK/sft.log"; }
grep -q "no {% generation %} markers, so each assistant message's content is located .* end-of-turn token" "$WORK/sft.log" ||
  fail "the log does not say that the end-of-turn token is trained"
stopped=0
for i in 1 2 3 4 5 6; do
  python3 - "$i" >"$WORK/messages.json" <<'PY'
import json, sys
m = json.loads(open("examples/tiny-chat/eval.jsonl").readlines()[int(sys.argv[1])])["messages"]
print(json.dumps(m[:2] if m[0]["role"] == "system" else m[:1]))  # up to the first user turn
PY
  timeout 120 "$TRLHPC" generate "$WORK/out" --chat_template_path "$WORK/plain.jinja" --messages "$WORK/messages.json" \
    --max_new_tokens 40 --json >"$WORK/gen.json" 2>"$WORK/gen.err" || { fail "generate $i: exit $?"; cat "$WORK/gen.err"; continue; }
  reason=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["finish_reason"], len(d["output_ids"]))' "$WORK/gen.json")
  echo "    prompt $i: $reason"
  [ "${reason%% *}" = stop ] && stopped=$((stopped + 1))
done
[ "$stopped" -eq 6 ] || fail "only $stopped of 6 greedy answers ended on the end-of-turn token"
e2e_end
