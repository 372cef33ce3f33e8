# Shared by the LoRA e2e tests (test_lora.sh, test_lora_modules_to_save.sh); sourced after tests/e2e/lib.sh's
# e2e_begin (TRLHPC, MPIRUN, ROOT, WORK, fail); the functions below read FIXTURE (curves.json,
# merged_logits.json) and ADAPTER (the fixture's initial adapter), which the test sets. Provides: MPI (mpirun with the flags these tests
# need), SETTINGS (tests/fixtures/make_trl_curves.py's SFTConfig values, 6 steps, as `trlhpc sft` flags)
# and compare REFERENCE(curves.json) METRICS.jsonl (every step's loss within 1e-6 and grad_norm within
# 2e-5 relative: the bounds of test_trl_curves.sh; both sides train the same tokens from the same
# weights, only fp32 summation order differs).
MPI=("$MPIRUN" --oversubscribe --bind-to none)
SETTINGS=(--max_length=192 --packing=false --assistant_only_loss=true --per_device_train_batch_size=2
  --gradient_accumulation_steps=2 --max_steps=6 --learning_rate=3e-3 --lr_scheduler_type=cosine
  --warmup_steps=2 --weight_decay=0.01 --adam_beta1=0.9 --adam_beta2=0.999 --adam_epsilon=1e-8
  --max_grad_norm=1.0 --seed=42 --logging_steps=1 --shuffle_dataset=false
  --dataset_name tests/fixtures/trl_curves/conversations.jsonl)

compare() {
  python3 - "$1" "$2" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1]))["steps"]
got = [json.loads(l) for l in open(sys.argv[2])]
got = [g for g in got if "grad_norm" in g]
assert len(got) == len(ref) == 6, (len(got), len(ref))
bounds = {"loss": 1e-6, "grad_norm": 2e-5}
worst = {k: 0.0 for k in bounds}
for r, g in zip(ref, got):
    assert g["step"] == r["step"]
    for k in bounds:
        worst[k] = max(worst[k], abs(g[k] - r[k]) / abs(r[k]))
print("    worst relative", {k: f"{v:.1e}" for k, v in worst.items()})
sys.exit(0 if all(worst[k] <= bounds[k] for k in bounds) else 1)
PY
}

run() {  # run NAME NP [flags...]: trains the fixture adapter into $WORK/NAME
  local name=$1 np=$2
  shift 2
  "${MPI[@]}" -np "$np" "$TRLHPC" sft --model_name_or_path "$ADAPTER" "${SETTINGS[@]}" --output_dir "$WORK/$name" "$@" \
    >"$WORK/$name.log" 2>&1
}

check_layout() {  # check_layout NAME NP [flags...]: the run's curve within the bounds of TRL's
  local name=$1 np=$2
  shift 2
  if ! run "$name" "$np" "$@"; then fail "$name: exit $?"; tail -5 "$WORK/$name.log"; return; fi
  echo "  $name (np $np $*)"
  compare "$FIXTURE/curves.json" "$WORK/$name/metrics.jsonl" || fail "$name: outside the bounds of TRL's curve"
}

same_steps_4_to_6() {  # same_steps_4_to_6 A.jsonl B.jsonl: a resumed run's steps 4-6 equal the uninterrupted run's
  python3 - "$1" "$2" <<'PY'
import json, sys
a = {r["step"]: r for r in map(json.loads, open(sys.argv[1])) if "grad_norm" in r}
b = {r["step"]: r for r in map(json.loads, open(sys.argv[2])) if "grad_norm" in r}
for s in (4, 5, 6):
    for k in ("loss", "grad_norm"):
        assert abs(a[s][k] - b[s][k]) <= 1e-6 * abs(a[s][k]), (s, k, a[s][k], b[s][k])
print("    steps 4-6 equal to the uninterrupted run")
PY
}

greedy_equal() {  # greedy_equal MODEL PROMPT: its greedy continuation is PEFT's (transformers' generate) of the adapter
  "$TRLHPC" generate "$1" --prompt "$2" --raw_prompt --max_new_tokens 12 --json 2>"$WORK/gen.err" |
    python3 -c "
import json, sys
got = json.loads(sys.stdin.read().strip().splitlines()[-1])
ref = json.load(open('$FIXTURE/merged_logits.json'))
assert got['input_ids'] == ref['prompt_ids'], ('prompt', got['input_ids'])
assert got['output_ids'] == ref['greedy_new_tokens'], (got['output_ids'], ref['greedy_new_tokens'])
" || fail "generate $1: not PEFT's greedy continuation ($(tail -1 "$WORK/gen.err"))"
}

expect_error() {  # expect_error PATTERN [sft flags...]: exit 1 and PATTERN in the output
  local pattern=$1
  shift
  "$TRLHPC" sft "${SETTINGS[@]}" --output_dir "$WORK/bad" "$@" >"$WORK/bad.log" 2>&1
  local code=$?
  if [[ $code -ne 1 ]] || ! grep -q -- "$pattern" "$WORK/bad.log"; then
    fail "expected exit 1 and '$pattern' for $*, got exit $code: $(tail -2 "$WORK/bad.log")"
  fi
}

# finish WHAT: lib.sh's summary line and exit status.
finish() {
  e2e_end || exit 1
  echo "all $1 checks passed"
}
