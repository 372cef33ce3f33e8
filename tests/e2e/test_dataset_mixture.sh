#!/usr/bin/env bash
# load_dataset semantics of `trlhpc sft` (issue 29): TRL's `datasets:` mixture in --config, data_files
# globs, columns, --dataset_test_split with --eval_strategy steps, test_split_size, and their errors.
#   - a mixture of two local datasets (one by split inference, one by a data_files glob, both with
#     columns: [messages]) trains to exactly the losses of one JSONL file holding the same rows in the
#     same order; the mixture in the other order trains differently (the check can fail);
#   - --eval_strategy steps evaluates on --dataset_test_split of --dataset_name: the same eval_loss as
#     --eval_dataset on that split's file;
#   - test_split_size cuts an eval set off the mixture (train and eval both logged);
#   - a missing split and a bad mixture entry fail with exit 1 on both ranks, naming the flag / the
#     config file and the entry.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
cd "$WORK"
export HF_HUB_CACHE="$ROOT/tests/fixtures/hub_cache" HF_HUB_OFFLINE=1

# Two datasets cut from the tiny chat rows, each row with an extra "id" column that columns: drops.
python3 - "$ROOT/examples/tiny-chat/train.jsonl" "$WORK" <<'EOF'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1])][:40]
work = sys.argv[2]
def write(path, part, start):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for k, r in enumerate(part):
            f.write(json.dumps({"id": start + k, "messages": r["messages"]}) + "\n")
write(f"{work}/a/train.jsonl", rows[0:14], 0)
write(f"{work}/a/test.jsonl", rows[14:20], 14)
write(f"{work}/b/data/train-00000-of-00001.jsonl", rows[20:40], 20)
with open(f"{work}/concat.jsonl", "w") as f:  # the mixture's rows, as TRL concatenates them
    for r in rows[0:14] + rows[20:40]:
        f.write(json.dumps({"messages": r["messages"]}) + "\n")
EOF
cat >"$WORK/mix.yaml" <<EOF
datasets:
  - path: $WORK/a
    columns: [messages]
  - path: $WORK/b
    data_files:
      train: data/train-*.jsonl
    columns: [messages]
EOF
cat >"$WORK/mix_reversed.yaml" <<EOF
datasets:
  - path: $WORK/b
    columns: [messages]
  - path: $WORK/a
    columns: [messages]
EOF
cat >"$WORK/mix_split.yaml" <<EOF
datasets:
  - path: $WORK/a
  - path: $WORK/b
test_split_size: 0.25
EOF
cat >"$WORK/mix_bad.yaml" <<EOF
datasets:
  - path: $WORK/a
  - path: $WORK/b
    colums: [messages]
EOF

run() {  # run NAME ARGS...: a 2-rank, 4-step run; exit code in $WORK/NAME.rc, log in $WORK/NAME.log
  local name=$1; shift
  trlhpc_np 300 2 sft --model_name_or_path trlhpc-test/tiny-qwen2 --max_steps 4 \
    --per_device_train_batch_size 2 --max_length 256 --learning_rate 1e-3 --logging_steps 1 --dataset_cache_dir none \
    --output_dir "$WORK/$name" "$@" >"$WORK/$name.log" 2>&1
  echo $? >"$WORK/$name.rc"
}
train() {  # train NAME ARGS...: must succeed
  run "$@"
  local rc; rc=$(cat "$WORK/$1.rc")
  if [ "$rc" -ne 0 ]; then fail "$1: exit $rc"; tail -20 "$WORK/$1.log" | sed 's/^/    /'; return; fi
  echo "ok $1"
}
metric() {  # metric NAME KEY: the KEY values of NAME's metrics.jsonl
  [ -f "$WORK/$1/metrics.jsonl" ] || { echo "none"; return; }
  python3 -c 'import json,sys; print([json.loads(l)[sys.argv[2]] for l in open(sys.argv[1]) if sys.argv[2] in json.loads(l)])' \
    "$WORK/$1/metrics.jsonl" "$2"
}

train mixture --config "$WORK/mix.yaml"
train concat --dataset_name "$WORK/concat.jsonl"
train reversed --config "$WORK/mix_reversed.yaml"
a=$(metric mixture loss); b=$(metric concat loss); c=$(metric reversed loss)
[ "$a" = "$b" ] && echo "    mixture == concatenated JSONL: $a" || fail "mixture losses $a differ from the concatenated JSONL's $b"
[ "$a" != "$c" ] || fail "the mixture in the other order trains alike ($c): row order is not exercised"
grep -q "mixture (.*mix.yaml datasets:): conversational" "$WORK/mixture.log" || fail "mixture: the dataset line does not name the mixture"

train eval_split --dataset_name "$WORK/a" --eval_strategy steps --eval_steps 2
train eval_file --dataset_name "$WORK/a" --eval_dataset "$WORK/a/test.jsonl" --eval_steps 2
e=$(metric eval_split eval_loss); f=$(metric eval_file eval_loss)
[ "$e" != "[]" ] && [ "$e" != "none" ] || fail "--eval_strategy steps logged no eval_loss"
[ "$e" = "$f" ] && echo "    eval on --dataset_test_split == --eval_dataset test.jsonl: $e" || fail "eval_loss $e differs from $f"

train mix_split --config "$WORK/mix_split.yaml" --eval_strategy steps
[ "$(metric mix_split eval_loss)" != "[]" ] || fail "test_split_size: no eval_loss"

run no_test --dataset_name "$WORK/b" --eval_strategy steps
[ "$(cat "$WORK/no_test.rc")" -eq 1 ] || fail "missing test split: exit $(cat "$WORK/no_test.rc"), expected 1"
n=$(grep -c 'has no split "test" (--dataset_test_split' "$WORK/no_test.log")
[ "$n" -eq 2 ] || { fail "missing test split: the message on $n ranks, expected 2"; tail -5 "$WORK/no_test.log"; }
grep -q "its splits: train, as Hugging Face" "$WORK/no_test.log" || fail "missing test split: the splits there are not listed"

run bad_entry --config "$WORK/mix_bad.yaml"
[ "$(cat "$WORK/bad_entry.rc")" -eq 1 ] || fail "bad entry: exit $(cat "$WORK/bad_entry.rc"), expected 1"
grep -q "mix_bad.yaml: datasets\[1\]: unknown key 'colums'" "$WORK/bad_entry.log" || { fail "bad entry not named"; tail -5 "$WORK/bad_entry.log"; }

e2e_end
