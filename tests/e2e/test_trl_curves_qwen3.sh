#!/usr/bin/env bash
# trlhpc against TRL SFTTrainer on a tiny random Qwen3 with Qwen3's chat template as shipped
# (tests/fixtures/trl_curves/qwen3/, written by tests/fixtures/make_trl_curves.py --family qwen3; versions in
# curves.json), on the 40 conversations of the Qwen2 fixture:
#  - "messages": conversational rows, every token trained (Qwen3's template has no {% generation %}, so
#    TRL allows no assistant_only_loss); the template puts <think>\n\n</think>\n\n before the last answer;
#  - "no_thinking": the same conversations as prompt-completion rows carrying TRL's per-row
#    chat_template_kwargs {"enable_thinking": false}: the prompt ends in an empty think block, the
#    completion-only loss trains the answer only. trlhpc runs it twice: with the column, and on the rows
#    without it plus --chat_template_kwargs '{"enable_thinking": false}' (one value for every row).
# Checks: the fixture's settings are the flags used here; `trlhpc tokenize` gives TRL's ids and trained
# positions; each curve within the bounds of tests/e2e/test_trl_curves.sh (loss, entropy 1e-6 relative,
# grad_norm 2e-5, accuracy one argmax flip; learning_rate, num_tokens, epoch exact). Negative controls that
# must fall outside them: enable_thinking left at its default (the think block becomes completion, trained),
# and a 1 % larger learning rate.
set -u
TRLHPC=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FIXTURE=tests/fixtures/trl_curves/qwen3
CONVERSATIONS=tests/fixtures/trl_curves/conversations.jsonl
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
export OMP_NUM_THREADS=1

SETTINGS=(--max_length=192 --packing=false --assistant_only_loss=false --per_device_train_batch_size=2
  --gradient_accumulation_steps=2 --num_train_epochs=1 --learning_rate=3e-3 --lr_scheduler_type=cosine
  --warmup_steps=2 --weight_decay=0.01 --adam_beta1=0.9 --adam_beta2=0.999 --adam_epsilon=1e-8
  --max_grad_norm=1.0 --seed=42 --logging_steps=1)
BOUNDS="loss=1e-6 entropy=1e-6 grad_norm=2e-5 mean_token_accuracy=one_flip"
NO_THINKING='{"enable_thinking": false}'

echo "1. the fixture's settings are the flags used here"
python3 - "$FIXTURE/curves.json" "${SETTINGS[@]}" <<'PY' || fail "curves.json settings differ from this test's flags"
import json, sys
settings = json.load(open(sys.argv[1]))["settings"]
flags = dict(a[2:].split("=", 1) for a in sys.argv[2:])
assert set(flags) == set(settings), (sorted(flags), sorted(settings))
for key, value in settings.items():
    same = flags[key] == str(value).lower() if isinstance(value, bool) else float(flags[key]) == float(value) \
        if isinstance(value, (int, float)) else flags[key] == value
    assert same, (key, flags[key], value)
print(f"    {len(flags)} settings")
PY

echo "2. trlhpc tokenizes the rows as TRL did"
tokenize() {  # tokenize NAME DATA_FILE TRL_RUN [FLAGS...]
  local name=$1 data=$2 run=$3
  shift 3
  "$TRLHPC" tokenize --tokenizer "$FIXTURE/model" --dataset_name "$data" --max_length 192 "$@" >"$WORK/$name.tokens" \
    2>"$WORK/$name.tokens.err" || { fail "tokenize $name"; cat "$WORK/$name.tokens.err"; }
  python3 tests/e2e/trl_curve_compare.py tokens "$FIXTURE/trl_tokenized_$run.jsonl" "$WORK/$name.tokens" ||
    fail "$name: tokens differ from TRL's $run run"
}
tokenize messages "$CONVERSATIONS" messages
tokenize no_thinking_column "$FIXTURE/prompt_completion_no_thinking.jsonl" no_thinking
tokenize no_thinking_flag "$FIXTURE/prompt_completion.jsonl" no_thinking --chat_template_kwargs "$NO_THINKING"

sft() {  # sft NAME DATA_FILE [FLAGS...]: 1 rank, rows in file order; metrics in $WORK/NAME/metrics.jsonl
  local name=$1 data=$2
  shift 2
  timeout 300 "$TRLHPC" sft --model_name_or_path "$FIXTURE/model" --dataset_name "$data" "${SETTINGS[@]}" \
    --shuffle_dataset false --dataset_cache_dir none --output_dir "$WORK/$name" "$@" >"$WORK/$name.log" 2>&1 ||
    { fail "$name: exit $?"; tail -5 "$WORK/$name.log"; }
}
compare_curve() {  # compare_curve METRICS TRL_RUN
  python3 tests/e2e/trl_curve_compare.py curve "$FIXTURE/curves.json" "$1" "$2" $BOUNDS
}

echo "3. trlhpc fp32 against TRL fp32"
sft messages "$CONVERSATIONS"
sft no_thinking_column "$FIXTURE/prompt_completion_no_thinking.jsonl"
sft no_thinking_flag "$FIXTURE/prompt_completion.jsonl" --chat_template_kwargs "$NO_THINKING"
for pair in messages:messages no_thinking_column:no_thinking no_thinking_flag:no_thinking; do
  echo "  trlhpc ${pair%%:*} vs TRL ${pair##*:}"
  compare_curve "$WORK/${pair%%:*}/metrics.jsonl" "${pair##*:}" || fail "trlhpc ${pair%%:*}: outside the bounds of TRL's curve"
done

echo "negative controls: must fall outside the bounds"
sft thinking_default "$FIXTURE/prompt_completion.jsonl"
sft lr_plus_1pct "$FIXTURE/prompt_completion_no_thinking.jsonl" --learning_rate 3.03e-3
for run in thinking_default lr_plus_1pct; do
  echo "  $run (its loss must fall outside the bound)"
  compare_curve "$WORK/$run/metrics.jsonl" no_thinking >"$WORK/$run.compare"
  head -1 "$WORK/$run.compare"
  grep -m 1 ': loss ' "$WORK/$run.compare" || fail "$run: its loss is within the bound, which cannot tell it from TRL's run"
done

[ "$failures" -eq 0 ] && echo "PASS" || { echo "$failures failure(s)"; exit 1; }
