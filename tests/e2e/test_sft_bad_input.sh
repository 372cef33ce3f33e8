#!/usr/bin/env bash
# Bad input to `trlhpc sft`: exit code 1 and a message naming the file/option/numbers, the same on every
# rank, and no hang (each run is bounded by `timeout`).
set -u
DATA=${TRLHPC_SHARED_DATA:-$(dirname "$0")/../../../shared/data}
DATA=$(realpath -m "$DATA")  # e2e_begin changes the working directory
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
cd "$WORK"  # every path below is absolute; anything written relative lands in the scratch folder

# expect_error NAME NP PATTERN -- ARGS...: runs on NP ranks, wants exit 1 and PATTERN once per rank.
expect_error() {
  local name=$1 np=$2 pattern=$3
  shift 4
  local out="$WORK/$name.log"
  trlhpc_np 120 "$np" "$@" >"$out" 2>&1
  local rc=$?
  local hits
  hits=$(grep -cF -- "$pattern" "$out")  # fixed string: messages hold [ ] and ( )
  if [ "$rc" -ne 1 ] || [ "$hits" -ne "$np" ]; then
    fail "$name: exit $rc (want 1), '$pattern' printed $hits times (want $np)"
    sed 's/^/    /' "$out" | head -20
  else
    passed=$((passed + 1))
    echo "ok   $name: $(grep -m1 -F -- "$pattern" "$out")"
  fi
}

mkdir -p "$WORK/nomodel" "$WORK/badjson" "$WORK/unknown" "$WORK/truncated"
echo '{"hidden_size": 64,' > "$WORK/badjson/config.json"
sed 's/LlamaForCausalLM/GPTNeoXForCausalLM/; s/"llama"/"gpt_neox"/' "$DATA/stories260K/config.json" > "$WORK/unknown/config.json"
cp "$DATA/stories260K/config.json" "$WORK/truncated/"
head -c 5000 "$DATA/stories260K/model.safetensors" > "$WORK/truncated/model.safetensors"
TEXT="$DATA/datasets/c4_text.jsonl"

expect_error missing-config 2 "nomodel/config.json" -- sft --model_name_or_path "$WORK/nomodel" --dataset_name "$TEXT" --output_dir "$WORK/o1"
expect_error corrupt-config 2 "badjson/config.json" -- sft --model_name_or_path "$WORK/badjson" --dataset_name "$TEXT" --output_dir "$WORK/o2"
expect_error unknown-architecture 2 "GPTNeoXForCausalLM" -- sft --model_name_or_path "$WORK/unknown" --dataset_name "$TEXT" --output_dir "$WORK/o3"
expect_error bad-ddp-timeout 2 "ddp_timeout" -- sft --model_name_or_path "$WORK/nomodel" --dataset_name "$TEXT" --output_dir "$WORK/o3b" --ddp_timeout=-5
expect_error truncated-safetensors 2 "truncated/model.safetensors" -- sft --model_name_or_path "$WORK/truncated" --tokenizer "$DATA/stories260K" --dataset_name "$TEXT" --output_dir "$WORK/o4"
expect_error dims-product 2 "world size 2" -- sft --model_config "$DATA/stories260K/config.json" --dataset_name "$TEXT" --dp_shard_size 3 --output_dir "$WORK/o5"
expect_error unknown-flag 2 "learning_rat" -- sft --learning_rat 1e-3
expect_error missing-dataset 1 "no_such.jsonl" -- sft --model_name_or_path "$DATA/stories260K" --dataset_name "$WORK/no_such.jsonl" --output_dir "$WORK/o6"
expect_error unknown-command 1 "unknown command" -- frobnicate

# Numeric options out of range: refused while parsing, before any file is read (the model and dataset
# need not exist), with the flag, the value and the range; from the command line or a --config file.
# One case per kind of rule here; tests/unit/test_sft_validation.cpp checks every option's message.
NUM="sft --model_config $WORK/none.json --dataset_name $WORK/none.jsonl --output_dir $WORK/o7"
expect_error lr-negative 2 "error: --learning_rate -1: must be >= 0 and finite" -- $NUM --learning_rate -1
expect_error lr-nan 2 "error: --learning_rate nan: must be >= 0 and finite" -- $NUM --learning_rate nan
expect_error lr-inf 2 "error: --learning_rate inf: must be >= 0 and finite" -- $NUM --learning_rate inf
expect_error epochs 2 "error: --num_train_epochs 0: must be > 0 and finite when --max_steps is -1" -- $NUM --num_train_epochs 0
expect_error max-steps 2 "error: --max_steps 0: must be -1 (train --num_train_epochs) or >= 1" -- $NUM --max_steps 0
expect_error warmup-beyond 2 "error: --warmup_steps 10: must be < --max_steps 5" -- $NUM --max_steps 5 --warmup_steps 10
expect_error warmup-ratio 2 "error: --warmup_ratio 1.5: must be in [0, 1)" -- $NUM --warmup_ratio 1.5
expect_error weight-decay 2 "error: --weight_decay -0.1: must be >= 0 and finite" -- $NUM --weight_decay -0.1
expect_error beta1 2 "error: --adam_beta1 1: must be in [0, 1)" -- $NUM --adam_beta1 1
expect_error beta2 2 "error: --adam_beta2 -0.5: must be in [0, 1)" -- $NUM --adam_beta2 -0.5
expect_error epsilon 2 "error: --adam_epsilon 0: must be > 0 and finite" -- $NUM --adam_epsilon 0
expect_error max-length 2 "error: --max_length 1: must be in [2, 2147483647]" -- $NUM --max_length 1
expect_error tp-size 2 "error: --tp_size 0: must be an integer in [1, 2147483647]" -- $NUM --tp_size 0
expect_error dp-shard 2 "error: --dp_shard_size -2: must be -1 (the rest of the world)" -- $NUM --dp_shard_size -2
printf 'learning_rate: -1\n' > "$WORK/bad_lr.yaml"
expect_error lr-yaml 2 "error: --learning_rate -1: must be >= 0 and finite" -- $NUM --config "$WORK/bad_lr.yaml"

# A dataset in which no token is trained: a chat template whose {% generation %} blocks enclose
# nothing, under --assistant_only_loss (rank 0 tokenizes, every rank reports its error).
printf '%s' "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% generation %}{% endgeneration %}{% endfor %}" > "$WORK/empty_generation.jinja"
expect_error untrainable-dataset 2 "no token is trained: all" -- sft --model_config "$ROOT/examples/tiny-chat/config.json" \
  --tokenizer "$ROOT/examples/tiny-chat" --dataset_name "$ROOT/examples/tiny-chat/train.jsonl" --assistant_only_loss \
  --chat_template_path "$WORK/empty_generation.jinja" --output_dir "$WORK/o8"
grep -qF -- "--assistant_only_loss: the chat template marks no assistant token" "$WORK/untrainable-dataset.log" ||
  fail "untrainable-dataset: the cause is not named"

e2e_end
