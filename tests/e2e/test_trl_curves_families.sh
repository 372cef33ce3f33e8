#!/usr/bin/env bash
# trlhpc against TRL SFTTrainer on tiny random Gemma 3 text, Gemma 2, Mistral, SmolLM3 and Llama models saved by
# transformers 5 (issue 27; tests/fixtures/trl_curves/<family>/, written by
# tests/fixtures/make_trl_curves_families.py, whose docstring gives each model's shape, tokenizer and chat
# template; versions in curves.json), fine-tuned on the 40 conversations of the Qwen2 fixture, every token
# trained, 10 optimizer steps. For each family:
#  1. the fixture's settings are the flags used here, and its model is the family's architecture;
#  2. `trlhpc tokenize` gives TRL's ids and trained positions (the family's special tokens, a BOS-prepending
#     post-processor that chat rows must not use twice, the shipped template);
#  3. `trlhpc sft` on 1 rank against TRL's curve within the bounds of tests/e2e/test_trl_curves.sh (loss,
#     entropy 1e-6 relative, grad_norm 2e-5, accuracy one argmax flip; learning_rate, num_tokens, epoch
#     exact). Measured on 2 cores (AVX-512 GEMM, 1 thread), worst over the four families and 10 steps:
#     loss 1.3e-7, entropy 8.8e-8, grad_norm 2.2e-6, accuracy no flip (2.3e-8: rounding of the logged mean).
#     That is the fp32 summation-order noise test_trl_curves.sh measured for Qwen2, so its bounds hold
#     unchanged here (the issue asks for 2e-4);
#  4. `trlhpc sft` at tp 2 x cp 2 on 4 ranks against the 1-rank run: loss, entropy and grad_norm within 1e-5
#     relative at every step. Measured: loss 6.8e-9, entropy 3.3e-9, grad_norm 4.7e-7, accuracy
#     equal: the sliding-window families (window 3) too, at every step, so the 1e-3 that
#     tests/mpi/test_sequence_parallel_training.cpp allows the later cp steps of mistral_tiny and
#     qwen3_sliding_tiny is not needed on these fixtures;
#  negative controls: a 1 % larger learning rate must fall outside both bounds (its loss differs by ~1e-3),
#  and for the sliding-window families (gemma3, gemma2, mistral, smollm3: window 3) the model with its window
#  widened past the longest row must fail already at step 1 (measured: loss off by 3.8e-4 .. 2.5e-3); for
#  gemma2 (attention cap 0.5, final cap 1.0, TRL trained it with eager attention) the model without either
#  cap must fail at step 1 too.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
CONVERSATIONS=tests/fixtures/trl_curves/conversations.jsonl
source tests/e2e/trl_curves_lib.sh  # SETTINGS, BOUNDS, check_settings, tokenize, sft, sft_np, compare_curve
LAYOUT_BOUNDS="loss=1e-5 entropy=1e-5 grad_norm=1e-5"

# family -> the architecture its config.json must name
declare -A ARCHITECTURE=([gemma3]=Gemma3ForCausalLM [gemma2]=Gemma2ForCausalLM [mistral]=MistralForCausalLM
  [smollm3]=SmolLM3ForCausalLM [llama]=LlamaForCausalLM)

# without_field FAMILY FIELD VALUE: a copy of the family's fixture whose config.json sets FIELD to VALUE
# (JSON); prints the copy's path.
without_field() {
  local copy=$WORK/$1.$2.fixture
  cp -r "tests/fixtures/trl_curves/$1" "$copy"
  python3 - "$copy/model/config.json" "$2" "$3" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config[sys.argv[2]] = json.loads(sys.argv[3])
json.dump(config, open(sys.argv[1], "w"), indent=1)
PY
  echo "$copy"
}
# must_miss_step1 FAMILY NAME FIXTURE WHY: that fixture's curve must leave TRL's bound at the first step.
must_miss_step1() {
  FIXTURE=$3 sft "$1.$2" "$CONVERSATIONS"
  compare_curve "$WORK/$1.$2/metrics.jsonl" messages >"$WORK/$1.$2.trl"
  head -1 "$WORK/$1.$2.trl"
  grep -q 'step 1: loss ' "$WORK/$1.$2.trl" || fail "$1: $4"
}

for family in gemma3 gemma2 mistral smollm3 llama; do
  FIXTURE=tests/fixtures/trl_curves/$family
  echo "== $family"
  echo "1. settings and architecture"
  check_settings || fail "$family: curves.json settings differ from this test's flags"
  grep -q "\"${ARCHITECTURE[$family]}\"" "$FIXTURE/model/config.json" ||
    fail "$family: model/config.json does not name ${ARCHITECTURE[$family]}"

  echo "2. trlhpc tokenizes the rows as TRL did"
  tokenize "$family" "$CONVERSATIONS" messages

  echo "3. trlhpc (1 rank) against TRL"
  sft "$family" "$CONVERSATIONS"
  grep -q "model ${ARCHITECTURE[$family]} " "$WORK/$family.log" || fail "$family: trlhpc did not build ${ARCHITECTURE[$family]}"
  compare_curve "$WORK/$family/metrics.jsonl" messages || fail "$family: outside the bounds of TRL's curve"

  echo "4. trlhpc tp 2 x cp 2 (4 ranks) against trlhpc on 1 rank"
  sft_np 4 "$family.tp2_cp2" "$CONVERSATIONS" --tp_size 2 --cp_size 2
  grep -q "cp 2 x sp 1 x tp 2" "$WORK/$family.tp2_cp2.log" || fail "$family: the mesh line is not cp 2 x tp 2"
  python3 tests/e2e/trl_curve_compare.py runs "$WORK/$family/metrics.jsonl" "$WORK/$family.tp2_cp2/metrics.jsonl" \
    $LAYOUT_BOUNDS || fail "$family: tp 2 x cp 2 differs from 1 rank"

  echo "negative control: learning rate +1 % must fall outside both bounds"
  sft "$family.lr_plus_1pct" "$CONVERSATIONS" --learning_rate 3.03e-3
  compare_curve "$WORK/$family.lr_plus_1pct/metrics.jsonl" messages >"$WORK/$family.lr_plus_1pct.trl"
  head -1 "$WORK/$family.lr_plus_1pct.trl"
  grep -q ': loss ' "$WORK/$family.lr_plus_1pct.trl" || fail "$family: lr +1 % is within the TRL bound on the loss"
  python3 tests/e2e/trl_curve_compare.py runs "$WORK/$family/metrics.jsonl" "$WORK/$family.lr_plus_1pct/metrics.jsonl" \
    $LAYOUT_BOUNDS >"$WORK/$family.lr_plus_1pct.layout"
  grep -q ': loss ' "$WORK/$family.lr_plus_1pct.layout" || fail "$family: lr +1 % is within the layout bound on the loss"

  if grep -q '"sliding_window": 3' "$FIXTURE/model/config.json"; then
    echo "negative control: the model with its window widened to 192 (no row is longer) must fall outside"
    must_miss_step1 "$family" no_window "$(without_field "$family" sliding_window 192)" \
      "without the window the first loss is within the bound: the fixture would not see the window"
  fi
  for cap in attn_logit_softcapping final_logit_softcapping; do
    grep -q "\"$cap\": [0-9]" "$FIXTURE/model/config.json" || continue
    echo "negative control: the model without $cap must fall outside"
    must_miss_step1 "$family" "no_$cap" "$(without_field "$family" "$cap" null)" \
      "without $cap the first loss is within the bound: the fixture would not see the cap"
  done
done

e2e_end
