# Shared by the e2e tests that hold trlhpc to a TRL SFTTrainer fixture in which every token is trained
# (test_trl_curves_qwen3.sh, test_trl_curves_families.sh); sourced after tests/e2e/lib.sh's e2e_begin (TRLHPC,
# MPIRUN, WORK, fail; the working directory is the repository root). The functions read FIXTURE, the fixture folder (model/, curves.json,
# trl_tokenized_<run>.jsonl), which the test sets and may change between families.
# Provides: SETTINGS, the fixtures' SFTConfig as `trlhpc sft` flags (make_trl_curves.py's
# with assistant_only_loss false: the shipped templates have no {% generation %}); BOUNDS, those of
# test_trl_curves.sh (loss, entropy 1e-6 relative, grad_norm 2e-5, accuracy one argmax flip; its header has
# the measurements behind them); check_settings, tokenize, sft, sft_np, compare_curve (below).

SETTINGS=(--max_length=192 --packing=false --assistant_only_loss=false --per_device_train_batch_size=2
  --gradient_accumulation_steps=2 --num_train_epochs=1 --learning_rate=3e-3 --lr_scheduler_type=cosine
  --warmup_steps=2 --weight_decay=0.01 --adam_beta1=0.9 --adam_beta2=0.999 --adam_epsilon=1e-8
  --max_grad_norm=1.0 --seed=42 --logging_steps=1)
BOUNDS="loss=1e-6 entropy=1e-6 grad_norm=2e-5 mean_token_accuracy=one_flip"

check_settings() {  # check_settings: $FIXTURE/curves.json's settings are exactly SETTINGS; exit status 1 if not
  python3 - "$FIXTURE/curves.json" "${SETTINGS[@]}" <<'PY'
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
}

tokenize() {  # tokenize NAME DATA_FILE TRL_RUN [FLAGS...]: `trlhpc tokenize` against $FIXTURE/trl_tokenized_TRL_RUN.jsonl
  local name=$1 data=$2 run=$3
  shift 3
  "$TRLHPC" tokenize --tokenizer "$FIXTURE/model" --dataset_name "$data" --max_length 192 "$@" >"$WORK/$name.tokens" \
    2>"$WORK/$name.tokens.err" || { fail "tokenize $name"; cat "$WORK/$name.tokens.err"; }
  python3 tests/e2e/trl_curve_compare.py tokens "$FIXTURE/trl_tokenized_$run.jsonl" "$WORK/$name.tokens" ||
    fail "$name: tokens differ from TRL's $run run"
}

sft_np() {  # sft_np NP NAME DATA_FILE [FLAGS...]: NP ranks (mpirun unless 1), rows in file order; $WORK/NAME/metrics.jsonl
  local np=$1 name=$2 data=$3
  shift 3
  local launch=()
  [ "$np" -gt 1 ] && launch=("$MPIRUN" --oversubscribe --bind-to none -np "$np")
  timeout 300 "${launch[@]}" "$TRLHPC" sft --model_name_or_path "$FIXTURE/model" --dataset_name "$data" "${SETTINGS[@]}" \
    --shuffle_dataset false --dataset_cache_dir none --output_dir "$WORK/$name" "$@" >"$WORK/$name.log" 2>&1 ||
    { fail "$name: exit $?"; tail -5 "$WORK/$name.log"; }
}
sft() { sft_np 1 "$@"; }  # sft NAME DATA_FILE [FLAGS...]: 1 rank

compare_curve() {  # compare_curve METRICS TRL_RUN: every logged step against $FIXTURE/curves.json's run, within BOUNDS
  python3 tests/e2e/trl_curve_compare.py curve "$FIXTURE/curves.json" "$1" "$2" $BOUNDS
}
