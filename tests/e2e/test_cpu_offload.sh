#!/usr/bin/env bash
# CPU offload end to end (src/parallel/data_parallel/host_offload.hpp) on the bundled tiny-chat job, 2 ranks. On the
# CPU backend offload runs the same code as on CUDA (pinned host buffers are host memory, the queued
# copies are memcpy), so it must change no bit:
#  1. DeepSpeed zero_stage 3 with offload_optimizer_device + offload_param_device cpu, saving every 3
#     steps: every logged loss, grad_norm, learning_rate, eval_loss and num_tokens equals the ZeRO-3
#     run without offload bit for bit; the start line names the offload, its pinned host bytes and the
#     device saving. The same for ZeRO-1 and ZeRO-2 with offload_optimizer_device cpu, and for FSDP
#     FULL_SHARD with fsdp_offload_params true under --bf16 (against the fsdp2 profile under --bf16), and
#     for LoRA adapters (--use_peft) under ZeRO-3 with parameter offload.
#  2. Resume with offload from an offload checkpoint (checkpoint-3): steps 4-9 and the evals equal the
#     uninterrupted run bit for bit; resume with offload from a checkpoint written without offload, and
#     without offload from an offload checkpoint: the same (checkpoints hold the fp32 masters and moments
#     wherever they lived).
#  3. Combinations trlhpc does not run are refused, exit 1, naming the key and the file, before any
#     collective (the job ends at once on every rank): --sharding zero2 over a parameter-offload file,
#     --sharding none over an optimizer-offload file, offload_param_device cpu at zero_stage 2, nvme.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

sft() {  # sft OUT FLAGS...: 2 ranks, 9 steps
  local out=$1
  shift
  trlhpc_np 300 2 sft --config examples/tiny-chat/sft.yaml --max_steps 9 \
    --logging_steps 1 --eval_steps 3 --peak_flops 1e12 --output_dir "$out" "$@" >"$out.log" 2>&1 ||
    { fail "$out: exit $?"; tail -5 "$out.log"; }
}

same() {  # same A B: B's logged metrics equal A's bit for bit (JSON numbers printed alike), no step twice
  python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PY' || fail "$2 differs from $1"
import json, sys
def rows(p):
    out = {}
    for line in open(p):
        r = json.loads(line)
        key = (r["step"], "eval_loss" in r)
        assert key not in out, f"{p}: step {key} logged twice"
        out[key] = {k: r[k] for k in ("loss", "grad_norm", "learning_rate", "eval_loss", "num_tokens") if k in r}
    return out
a, b = rows(sys.argv[1]), rows(sys.argv[2])
assert a == b, [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)][:3]
print(f"    {len(b)} lines equal")
PY
}

deepspeed() {  # deepspeed FILE STAGE OPTIMIZER_DEVICE PARAM_DEVICE
  printf 'distributed_type: DEEPSPEED\nmixed_precision: "no"\ndeepspeed_config:\n  zero_stage: %s\n  offload_optimizer_device: %s\n  offload_param_device: %s\n' \
    "$2" "$3" "$4" >"$1"
}
deepspeed "$WORK/z3_offload.yaml" 3 cpu cpu
deepspeed "$WORK/z3_offload_optimizer.yaml" 3 cpu none
deepspeed "$WORK/z2_offload.yaml" 2 cpu none
deepspeed "$WORK/z1_offload.yaml" 1 cpu none
deepspeed "$WORK/z2_param.yaml" 2 cpu cpu
deepspeed "$WORK/z2_nvme.yaml" 2 nvme none
printf 'distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: true\n  fsdp_offload_params: true\n' \
  >"$WORK/fsdp_offload.yaml"

# 1. Offload against no offload.
echo "1. offload trains bit for bit as without"
sft "$WORK/z3" --accelerate_config zero3 --bf16 false --save_steps 3
sft "$WORK/z3_offload" --accelerate_config "$WORK/z3_offload.yaml" --save_steps 3
same "$WORK/z3" "$WORK/z3_offload"
grep -q "offload optimizer + parameters: pinned host [0-9.]* MiB, device saving [0-9.]* MiB" "$WORK/z3_offload.log" ||
  fail "the start line does not name the offload: $(grep -m1 'sharding' "$WORK/z3_offload.log")"
grep -q "offload" "$WORK/z3.log" && fail "the run without offload mentions offload"
sft "$WORK/z3_offload_optimizer" --accelerate_config "$WORK/z3_offload_optimizer.yaml"
same "$WORK/z3" "$WORK/z3_offload_optimizer"
grep -q "offload optimizer: pinned host" "$WORK/z3_offload_optimizer.log" || fail "zero3 offload optimizer: start line"
for stage in 1 2; do
  sft "$WORK/z$stage" --accelerate_config "zero$stage" --bf16 false
  sft "$WORK/z${stage}_offload" --accelerate_config "$WORK/z${stage}_offload.yaml"
  same "$WORK/z$stage" "$WORK/z${stage}_offload"
done
sft "$WORK/fsdp_bf16" --accelerate_config fsdp2 --bf16 true
sft "$WORK/fsdp_offload_bf16" --accelerate_config "$WORK/fsdp_offload.yaml" --bf16 true
same "$WORK/fsdp_bf16" "$WORK/fsdp_offload_bf16"
grep -q "compute bf16\|bf16" "$WORK/fsdp_offload_bf16.log" || fail "fsdp offload bf16 run does not say bf16"

# LoRA: the adapters are the trained store, so they are what is offloaded (the frozen base is untouched).
sft "$WORK/lora" --accelerate_config zero3 --bf16 false --use_peft --lora_r 4 --lora_dropout 0.1
sft "$WORK/lora_offload" --accelerate_config "$WORK/z3_offload.yaml" --use_peft --lora_r 4 --lora_dropout 0.1
same "$WORK/lora" "$WORK/lora_offload"

# 2. Resume.
echo "2. resume"
resume() {  # resume NAME FROM FLAGS...: checkpoint-3 of run FROM, resumed from latest
  local name=$1 from=$2
  shift 2
  mkdir -p "$WORK/$name"
  cp -r "$WORK/$from/checkpoint-3" "$WORK/$name/"
  cp "$WORK/$from/metrics.jsonl" "$WORK/$name/"
  sft "$WORK/$name" --resume_from_checkpoint latest "$@"
}
resume offload_from_offload z3_offload --accelerate_config "$WORK/z3_offload.yaml"
same "$WORK/z3_offload" "$WORK/offload_from_offload"
resume offload_from_plain z3 --accelerate_config "$WORK/z3_offload.yaml"
same "$WORK/z3" "$WORK/offload_from_plain"
resume plain_from_offload z3_offload --accelerate_config zero3 --bf16 false
same "$WORK/z3" "$WORK/plain_from_offload"

# 3. Refusals: exit 1 at once, naming the key and the file.
echo "3. refusals"
refused() {  # refused WHAT EXPECTED_TEXT FLAGS...
  local what=$1 text=$2
  shift 2
  local start=$SECONDS code=0
  trlhpc_np 60 2 sft --config examples/tiny-chat/sft.yaml --max_steps 2 \
    --output_dir "$WORK/refused" "$@" >"$WORK/refused.log" 2>&1 || code=$?
  [ "$code" = 1 ] || fail "$what: exit $code, expected 1"
  grep -qF -- "$text" "$WORK/refused.log" || { fail "$what: no '$text' in"; tail -3 "$WORK/refused.log"; }
  [ $((SECONDS - start)) -lt 30 ] || fail "$what: took $((SECONDS - start)) s (waited in a collective?)"
  [ -e "$WORK/refused/metrics.jsonl" ] && fail "$what: training started"
  rm -rf "$WORK/refused"
}
refused "param offload under zero2" "deepspeed_config.offload_param_device cpu in $WORK/z3_offload.yaml: parameter offload needs sharding zero3" \
  --accelerate_config "$WORK/z3_offload.yaml" --sharding zero2
refused "offload under DDP" "deepspeed_config.offload_optimizer_device cpu in $WORK/z2_offload.yaml: CPU offload needs a sharded optimizer" \
  --accelerate_config "$WORK/z2_offload.yaml" --sharding none
refused "param offload at stage 2" "$WORK/z2_param.yaml" --accelerate_config "$WORK/z2_param.yaml"
refused "param offload at stage 2 (key)" "offload_param_device cpu needs zero_stage 3" --accelerate_config "$WORK/z2_param.yaml"
refused "nvme" "deepspeed_config.offload_optimizer_device nvme is not supported" --accelerate_config "$WORK/z2_nvme.yaml"

e2e_end
