#!/usr/bin/env bash
# trlhpc against TRL SFTTrainer itself: the loss curve TRL 1.16 gives on a tiny random Qwen2 and 40 real
# conversations (tests/fixtures/trl_curves/, written by tests/fixtures/make_trl_curves.py with torch,
# transformers and trl; their versions are in curves.json), and the same rows as JSON Lines and as Parquet.
#  1. The fixture's recorded SFTConfig settings are exactly the flags given to trlhpc here (the packed run:
#     the same plus packing).
#  2. `trlhpc tokenize` gives, for the JSONL and the Parquet file, the token ids and trained positions
#     TRL trained on (trl_tokenized.jsonl): the two runs see the same tokens.
#  3. TRL's curve on the Parquet file equals its curve on the JSONL bit for bit (the same rows).
#  4. trlhpc (1 rank, fp32) on the JSONL and on the Parquet file: the same metrics bit for bit.
#  5. trlhpc's fp32 curves against TRL's fp32 curves (JSONL, Parquet, and packed: TRL's bfd bins in
#     padding-free micro-batches against trlhpc's --packing), per step, within:
#       loss, entropy 1e-6 relative; grad_norm 2e-5 relative; mean_token_accuracy: at most one argmax
#       flip (1 / (accumulation steps x target tokens) of the step's smallest micro-step);
#       learning_rate 1e-9 relative; num_tokens and epoch exact.
#     Why these bounds: both sides train the same tokens from the same weights with the same update, so
#     they differ only in fp32 summation order (GEMM blocking, reductions, fused AdamW) and in how the logged
#     value is rounded (PyTorch logs float32, trlhpc accumulates in double). Measured on 1 and 2 threads,
#     with trlhpc's AVX-512 GEMM and with OpenBLAS: loss <= 1.1e-7, entropy <= 6.7e-8, grad_norm <= 2.5e-6
#     (1.4e-6 already at step 1, where the weights are bitwise equal: a norm over 150k gradient entries,
#     each carrying reduction-order noise), accuracy equal. The bounds sit about 10x above that and well
#     below the smallest real change we could find: training without weight decay moves the loss by 2e-5
#     and grad_norm by 1.4e-4; a 1 % larger learning rate moves the loss by 1.8e-3. Both are run below as
#     negative controls that must fall outside the bounds, so the comparison is shown to be able to fail.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
FIXTURE=tests/fixtures/trl_curves

# The SFTConfig of make_trl_curves.py, as trlhpc flags (checked against curves.json below).
SETTINGS=(--max_length=192 --packing=false --assistant_only_loss=true --per_device_train_batch_size=2
  --gradient_accumulation_steps=2 --num_train_epochs=1 --learning_rate=3e-3 --lr_scheduler_type=cosine
  --warmup_steps=2 --weight_decay=0.01 --adam_beta1=0.9 --adam_beta2=0.999 --adam_epsilon=1e-8
  --max_grad_norm=1.0 --seed=42 --logging_steps=1)
FP32_BOUNDS="loss=1e-6 entropy=1e-6 grad_norm=2e-5 mean_token_accuracy=one_flip"

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
overrides = {name: run["overrides"] for name, run in json.load(open(sys.argv[1]))["runs"].items()}
assert overrides == {"fp32_jsonl": {}, "fp32_parquet": {}, "bf16_jsonl": {}, "fp32_packed_jsonl": {"packing": True}}, overrides
print(f"    {len(flags)} settings; the packed run adds packing")
PY

echo "2. trlhpc tokenizes both files as TRL did"
for data in conversations.jsonl conversations.parquet; do
  "$TRLHPC" tokenize --tokenizer "$FIXTURE/model" --dataset_name "$FIXTURE/$data" --assistant_only_loss \
    --max_length 192 >"$WORK/$data.tokens" 2>"$WORK/$data.tokens.err" || { fail "tokenize $data"; cat "$WORK/$data.tokens.err"; }
  python3 tests/e2e/trl_curve_compare.py tokens "$FIXTURE/trl_tokenized.jsonl" "$WORK/$data.tokens" ||
    fail "$data: tokens differ from TRL's"
done

echo "3. TRL: the Parquet curve is the JSONL curve"
python3 - "$FIXTURE/curves.json" <<'PY' || fail "TRL's Parquet and JSONL curves differ"
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
a, b = runs["fp32_jsonl"]["steps"], runs["fp32_parquet"]["steps"]
assert a == b, [(x["step"], k) for x, y in zip(a, b) for k in x if x[k] != y.get(k)]
print(f"    {len(a)} steps equal")
PY

sft() {  # sft NAME DATA_FILE [FLAGS...]: 1 rank, rows in file order; metrics in $WORK/NAME/metrics.jsonl
  local name=$1 data=$2
  shift 2
  timeout 300 "$TRLHPC" sft --model_name_or_path "$FIXTURE/model" --dataset_name "$FIXTURE/$data" "${SETTINGS[@]}" \
    --shuffle_dataset false --dataset_cache_dir none --output_dir "$WORK/$name" "$@" >"$WORK/$name.log" 2>&1 ||
    { fail "$name: exit $?"; tail -5 "$WORK/$name.log"; }
}

# compare_curve METRICS FIXTURE_RUN BOUNDS...: every logged step of trlhpc's METRICS against the TRL run
# FIXTURE_RUN of curves.json (fp32_jsonl, fp32_parquet, bf16_jsonl). BOUNDS: METRIC=REL (relative bound) or
# mean_token_accuracy=one_flip. Steps, learning_rate (1e-9), num_tokens and epoch are always compared.
compare_curve() {
  python3 tests/e2e/trl_curve_compare.py curve "$FIXTURE/curves.json" "$@"
}

echo "4. trlhpc: the Parquet run is the JSONL run"
sft fp32_jsonl conversations.jsonl
sft fp32_parquet conversations.parquet
python3 - "$WORK/fp32_jsonl/metrics.jsonl" "$WORK/fp32_parquet/metrics.jsonl" <<'PY' || fail "trlhpc's JSONL and Parquet runs differ"
import json, sys
keys = ("step", "loss", "grad_norm", "learning_rate", "entropy", "mean_token_accuracy", "num_tokens", "epoch")
a, b = ([{k: r[k] for k in keys} for r in map(json.loads, open(p)) if "loss" in r] for p in sys.argv[1:3])
assert len(a) == 10 and a == b, (len(a), [(x["step"], k) for x, y in zip(a, b) for k in keys if x[k] != y[k]])
print(f"    {len(a)} steps equal")
PY

echo "5. trlhpc fp32 against TRL fp32"
sft fp32_packed_jsonl conversations.jsonl --packing=true
for run in fp32_jsonl fp32_parquet fp32_packed_jsonl; do
  echo "  trlhpc $run vs TRL $run"
  compare_curve "$WORK/$run/metrics.jsonl" "$run" $FP32_BOUNDS || fail "trlhpc $run: outside the bounds of TRL's curve"
done

echo "6. trlhpc --bf16 against TRL bf16=True (torch.autocast on the CPU)"
# Issue 23's bound is 2 % on the loss per step; it cannot tell bf16 from fp32 on this model (TRL's own
# bf16 loss is within 1.1e-4 of its fp32 loss), so grad_norm is bounded too: TRL bf16 vs fp32 differ
# by 3.9 % in grad_norm here, trlhpc --bf16 vs TRL bf16 measured <= 0.69 % (AVX512-BF16 engine; 0.11 %
# with the fp32-on-bf16-inputs one; the recipes differ: trlhpc keeps weight gradients and logits fp32
# where autocast rounds them to bf16). 1.5 % sits between: about 2x the measured gap, half the
# fp32-vs-bf16 one, and the fp32 run below must fail it.
BF16_BOUNDS="loss=0.02 grad_norm=0.015"
sft bf16_jsonl conversations.jsonl --bf16
compare_curve "$WORK/bf16_jsonl/metrics.jsonl" bf16_jsonl $BF16_BOUNDS ||
  fail "trlhpc --bf16: outside the bounds of TRL's bf16=True curve"
echo "  control: trlhpc fp32 must fall outside the bf16 bounds"
if compare_curve "$WORK/fp32_jsonl/metrics.jsonl" bf16_jsonl $BF16_BOUNDS >/dev/null; then
  fail "trlhpc fp32 passes the bf16 bounds: they cannot tell the precisions apart"
fi

echo "negative controls: changes a bug could make must fall outside the fp32 bounds"
sft no_weight_decay conversations.jsonl --weight_decay 0
sft lr_plus_1pct conversations.jsonl --learning_rate 3.03e-3
for run in no_weight_decay lr_plus_1pct; do
  echo "  $run (its loss must fall outside the bound)"
  compare_curve "$WORK/$run/metrics.jsonl" fp32_jsonl $FP32_BOUNDS >"$WORK/$run.compare"
  head -1 "$WORK/$run.compare"
  grep -m 1 ': loss ' "$WORK/$run.compare" || fail "$run: its loss is within the bound, which cannot tell it from TRL's run"
done

e2e_end
