#!/usr/bin/env bash
# TRL parity at the edges, end to end on the bundled tiny-chat job (21 conversations, no packing, so an
# epoch ends with a partial batch):
#  1. --dataloader_drop_last false (HF's default): global batch 4 -> 6 steps per epoch (5 full + 1 row),
#     12 steps over 2 epochs; the logged epoch after step u is u / 6 (HF: micro-batches consumed / len
#     of the dataloader, tests/unit/test_sampler.cpp derives it from transformers 4.57.1's Trainer);
#     true: 5 steps per epoch, 10 in all.
#  2. The same global batch of 4 rows per micro-step on 1 rank, 2 ranks DDP, tp 2 (also with tp sequence
#     parallelism), cp 2 and sp 2 (the
#     last step's single row leaves one rank an empty slot, which trains a padding row): every logged
#     loss, grad_norm, TRL entropy and mean_token_accuracy, and the eval ones, within 1e-5 relative of
#     the 1-rank run (fp32 reduction order only, the bound of the layout-equivalence tests).
#  3. A repeated flag keeps its last value (--max_steps 3 --max_steps 4 trains 4 steps).
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
head -21 examples/tiny-chat/train.jsonl >"$WORK/train.jsonl"
head -9 examples/tiny-chat/eval.jsonl >"$WORK/eval.jsonl"

sft() {  # sft NP OUT FLAGS...
  local np=$1 out=$2
  shift 2
  trlhpc_np 300 "$np" sft --config examples/tiny-chat/sft.yaml --packing false \
    --dataset_name "$WORK/train.jsonl" --eval_dataset "$WORK/eval.jsonl" --num_train_epochs 2 --logging_steps 1 \
    --eval_steps 6 --peak_flops 1e12 --dataset_cache_dir none --output_dir "$out" "$@" >"$out.log" 2>&1 ||
    { fail "$out: exit $?"; tail -5 "$out.log"; }
}

check_epochs() {  # check_epochs OUT STEPS STEPS_PER_EPOCH
  python3 - "$1/metrics.jsonl" "$2" "$3" <<'PY' || fail "$1: steps or epochs differ from HF's"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
steps, per_epoch = int(sys.argv[2]), int(sys.argv[3])
assert [r["step"] for r in rows] == list(range(1, steps + 1)), [r["step"] for r in rows]
for r in rows:
    assert abs(r["epoch"] - r["step"] / per_epoch) < 1e-12, (r["step"], r["epoch"])
print(f"    {steps} steps, epoch = step / {per_epoch}")
PY
}

echo "dataloader_drop_last false (default) and true"
# Evaluation batches as the training ones (per rank x dp the same in every layout): eval entropy and
# token accuracy are means over eval batches, as TRL's, so they follow --per_device_eval_batch_size.
sft 1 "$WORK/one" --per_device_train_batch_size 4 --per_device_eval_batch_size 4
check_epochs "$WORK/one" 12 6
sft 1 "$WORK/drop" --per_device_train_batch_size 4 --dataloader_drop_last
check_epochs "$WORK/drop" 10 5

compare() {  # compare A B: every metric of B within 1e-5 relative of A's
  python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PY'
import json, sys
def rows(p):
    return {(r["step"], "eval_loss" in r): r for r in map(json.loads, open(p))}
a, b = rows(sys.argv[1]), rows(sys.argv[2])
assert set(a) == set(b), (sorted(a), sorted(b))
keys = ("loss", "grad_norm", "entropy", "mean_token_accuracy", "eval_loss", "eval_entropy", "eval_mean_token_accuracy",
        "epoch", "num_tokens")
worst = 0.0
for k, r in b.items():
    for key in keys:
        if key in a[k] or key in r:
            x, y = r[key], a[k][key]
            worst = max(worst, abs(x - y) / abs(y) if y else abs(x))
assert all("mean_token_accuracy" in r or "eval_mean_token_accuracy" in r for r in b.values()), "metrics missing"
print(f"    {len(b)} lines, worst relative difference {worst:.3g}")
assert worst <= 1e-5, worst
PY
}
for layout in "2 ddp --per_device_train_batch_size 2 --per_device_eval_batch_size 2" \
              "2 tp2 --tp_size 2 --per_device_train_batch_size 4 --per_device_eval_batch_size 4" \
              "2 tp2sp --tp_size 2 --tp_sequence_parallel --per_device_train_batch_size 4 --per_device_eval_batch_size 4" \
              "2 cp2 --cp_size 2 --per_device_train_batch_size 4 --per_device_eval_batch_size 4" \
              "2 sp2 --sp_size 2 --per_device_train_batch_size 4 --per_device_eval_batch_size 4"; do
  set -- $layout
  np=$1 name=$2
  shift 2
  echo "$name against 1 rank"
  sft "$np" "$WORK/$name" "$@"
  compare "$WORK/one" "$WORK/$name" || fail "$name: metrics differ from the 1-rank run"
done

echo "a repeated flag keeps its last value"
sft 1 "$WORK/repeat" --per_device_train_batch_size 4 --max_steps 3 --max_steps 4 --num_train_epochs 1
[ "$(grep -c '"loss"' "$WORK/repeat/metrics.jsonl")" -eq 4 ] || fail "--max_steps 3 --max_steps 4 did not train 4 steps"

e2e_end
