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
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
FIXTURE=tests/fixtures/trl_curves/qwen3
CONVERSATIONS=tests/fixtures/trl_curves/conversations.jsonl
source tests/e2e/trl_curves_lib.sh  # SETTINGS, BOUNDS, check_settings, tokenize, sft, compare_curve
NO_THINKING='{"enable_thinking": false}'

echo "1. the fixture's settings are the flags used here"
check_settings || fail "curves.json settings differ from this test's flags"

echo "2. trlhpc tokenizes the rows as TRL did"
tokenize messages "$CONVERSATIONS" messages
tokenize no_thinking_column "$FIXTURE/prompt_completion_no_thinking.jsonl" no_thinking
tokenize no_thinking_flag "$FIXTURE/prompt_completion.jsonl" no_thinking --chat_template_kwargs "$NO_THINKING"

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

e2e_end
