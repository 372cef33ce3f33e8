#!/usr/bin/env bash
# Bad input to `trlhpc sft`: exit code 1 and a message naming the file/option/numbers, the same on every
# rank, and no hang (each run is bounded by `timeout`).
set -u
TRLHPC=$1
MPIRUN=${2:-mpirun}
DATA=${TRLHPC_SHARED_DATA:-$(dirname "$0")/../../../shared/data}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0

# expect_error NAME NP PATTERN -- ARGS...: runs on NP ranks, wants exit 1 and PATTERN once per rank.
expect_error() {
  local name=$1 np=$2 pattern=$3
  shift 4
  local out="$WORK/$name.log"
  timeout 120 "$MPIRUN" --oversubscribe -np "$np" "$TRLHPC" "$@" >"$out" 2>&1
  local rc=$?
  local hits
  hits=$(grep -c -- "$pattern" "$out")
  if [ "$rc" -ne 1 ] || [ "$hits" -ne "$np" ]; then
    echo "FAIL $name: exit $rc (want 1), '$pattern' printed $hits times (want $np)"
    sed 's/^/    /' "$out" | head -20
    failures=$((failures + 1))
  else
    echo "ok   $name: $(grep -m1 -- "$pattern" "$out")"
  fi
}

mkdir -p "$WORK/nomodel" "$WORK/badjson" "$WORK/unknown" "$WORK/truncated"
echo '{"hidden_size": 64,' > "$WORK/badjson/config.json"
sed 's/LlamaForCausalLM/MistralForCausalLM/; s/"llama"/"mistral"/' "$DATA/stories260K/config.json" > "$WORK/unknown/config.json"
cp "$DATA/stories260K/config.json" "$WORK/truncated/"
head -c 5000 "$DATA/stories260K/model.safetensors" > "$WORK/truncated/model.safetensors"
TEXT="$DATA/datasets/c4_text.jsonl"

expect_error missing-config 2 "nomodel/config.json" -- sft --model_name_or_path "$WORK/nomodel" --dataset_name "$TEXT" --output_dir "$WORK/o1"
expect_error corrupt-config 2 "badjson/config.json" -- sft --model_name_or_path "$WORK/badjson" --dataset_name "$TEXT" --output_dir "$WORK/o2"
expect_error unknown-architecture 2 "MistralForCausalLM" -- sft --model_name_or_path "$WORK/unknown" --dataset_name "$TEXT" --output_dir "$WORK/o3"
expect_error bad-ddp-timeout 2 "ddp_timeout" -- sft --model_name_or_path "$WORK/nomodel" --dataset_name "$TEXT" --output_dir "$WORK/o3b" --ddp_timeout=-5
expect_error truncated-safetensors 2 "truncated/model.safetensors" -- sft --model_name_or_path "$WORK/truncated" --tokenizer "$DATA/stories260K" --dataset_name "$TEXT" --output_dir "$WORK/o4"
expect_error dims-product 2 "world size 2" -- sft --model_config "$DATA/stories260K/config.json" --dataset_name "$TEXT" --dp_shard_size 3 --output_dir "$WORK/o5"
expect_error unknown-flag 2 "learning_rat" -- sft --learning_rat 1e-3
expect_error missing-dataset 1 "no_such.jsonl" -- sft --model_name_or_path "$DATA/stories260K" --dataset_name "$WORK/no_such.jsonl" --output_dir "$WORK/o6"
expect_error unknown-command 1 "unknown command" -- frobnicate

echo "$((8 - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
