#!/usr/bin/env bash
# Hub ids, offline: `trlhpc sft --model_name_or_path ORG/NAME --dataset_name ORG/NAME` with HF_HUB_CACHE
# pointing at tests/fixtures/hub_cache (laid out by huggingface_hub, make_hub_cache_fixture.py).
#   - a model by branch (main), by another branch (--model_revision v1) and by commit sha trains;
#   - a hub dataset (JSONL and Parquet shards under data/) trains, the Parquet one to the same losses
#     as the same rows as JSON Lines; --eval_strategy steps evaluates on its data/test-* shard;
#   - an id that is not in the cache fails with exit 1 on both ranks, naming the searched paths and the
#     huggingface-cli command.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
cd "$WORK"  # no local folder named like the ids: the cache must answer
export HF_HUB_CACHE="$ROOT/tests/fixtures/hub_cache" HF_HUB_OFFLINE=1

train() {  # train NAME ARGS...: a 2-rank, 3-step run; metrics kept as $WORK/NAME.metrics.jsonl
  local name=$1; shift
  trlhpc_np 300 2 sft --max_steps 3 --per_device_train_batch_size 2 \
    --max_length 256 --learning_rate 1e-3 --logging_steps 1 --dataset_cache_dir none --output_dir "$WORK/$name" \
    "$@" >"$WORK/$name.log" 2>&1
  local rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name: exit $rc"; tail -20 "$WORK/$name.log" | sed 's/^/    /'; return; fi
  cp "$WORK/$name/metrics.jsonl" "$WORK/$name.metrics.jsonl"
  echo "ok $name"
}

losses() { python3 -c 'import json,sys; print([json.loads(l)["loss"] for l in open(sys.argv[1]) if "loss" in json.loads(l)])' "$1"; }

train main --model_name_or_path trlhpc-test/tiny-qwen2 --dataset_name trlhpc-test/tiny-chat-jsonl
train v1 --model_name_or_path trlhpc-test/tiny-qwen2 --model_revision v1 --dataset_name trlhpc-test/tiny-chat-jsonl
sha=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["v1"])' "$HF_HUB_CACHE/expected.json")
train sha --model_name_or_path trlhpc-test/tiny-qwen2 --model_revision "$sha" --dataset_name trlhpc-test/tiny-chat-jsonl
if [ -f "$WORK/v1.metrics.jsonl" ] && [ -f "$WORK/sha.metrics.jsonl" ]; then
  [ "$(losses "$WORK/v1.metrics.jsonl")" = "$(losses "$WORK/sha.metrics.jsonl")" ] || fail "revision v1 and its sha train differently"
  [ "$(losses "$WORK/v1.metrics.jsonl")" != "$(losses "$WORK/main.metrics.jsonl")" ] || fail "main and v1 (other weights) train alike"
fi
if true; then
  train parquet --model_name_or_path trlhpc-test/tiny-qwen2 --dataset_name trlhpc-test/tiny-chat --shuffle_dataset false
  train jsonl --model_name_or_path trlhpc-test/tiny-qwen2 --dataset_name trlhpc-test/tiny-chat-jsonl --shuffle_dataset false
  if [ -f "$WORK/parquet.metrics.jsonl" ] && [ -f "$WORK/jsonl.metrics.jsonl" ]; then
    a=$(losses "$WORK/parquet.metrics.jsonl"); b=$(losses "$WORK/jsonl.metrics.jsonl")
    [ "$a" = "$b" ] && echo "    parquet == jsonl: $a" || fail "parquet losses $a differ from jsonl $b"
  fi
fi

# The hub dataset's data/test-00000-of-00001.parquet is its test split (load_dataset's shard rule):
# --eval_strategy steps evaluates on it (--dataset_test_split, default test).
train eval_split --model_name_or_path trlhpc-test/tiny-qwen2 --dataset_name trlhpc-test/tiny-chat --eval_strategy steps --eval_steps 2
if [ -f "$WORK/eval_split.metrics.jsonl" ]; then
  n=$(grep -c '"eval_loss"' "$WORK/eval_split.metrics.jsonl")
  [ "$n" -ge 1 ] && echo "    eval on the hub test split: $n evaluations" || fail "--eval_strategy steps: no eval_loss"
fi

trlhpc_np 120 2 sft --model_name_or_path Qwen/Qwen2.5-0.5B \
  --dataset_name trlhpc-test/tiny-chat-jsonl --output_dir "$WORK/missing" >"$WORK/missing.log" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "missing model: exit $rc, expected 1"
n=$(grep -c "huggingface-cli download Qwen/Qwen2.5-0.5B" "$WORK/missing.log")
[ "$n" -eq 2 ] || { fail "missing model: the download hint on $n ranks, expected 2"; cat "$WORK/missing.log"; }
grep -q "models--Qwen--Qwen2.5-0.5B/refs/main" "$WORK/missing.log" || fail "missing model: searched paths not named"

e2e_end
