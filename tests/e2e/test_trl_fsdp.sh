#!/usr/bin/env bash
# TrainingArguments' --fsdp / --fsdp_config end to end (cli/fsdp_config.hpp) on the bundled tiny-chat
# job, 2 ranks: `--fsdp "full_shard auto_wrap"` gives the layout (mesh and sharding on the start line)
# and the logged curve of the equivalent accelerate FSDP run (--accelerate_config fsdp2, whose
# mixed_precision bf16 is overridden by --bf16 false) bit for bit; so do shard_grad_op against an
# accelerate file with fsdp_reshard_after_forward false, the same strategy from a --config YAML list
# with an --fsdp_config file, and offload with the fsdp_offload_params file. A contradiction
# (--fsdp full_shard with --accelerate_config zero2) stops both ranks, exit 1, naming both, before training.
source "$(dirname "$0")/lib.sh"
set -u
e2e_begin "$@"

sft() {  # sft OUT FLAGS...: 2 ranks, 6 steps, an eval at 3 and 6; the YAML is $CONFIG (default the example's)
  local out=$1
  shift
  timeout 300 "$MPIRUN" --oversubscribe --bind-to none -np 2 "$TRLHPC" sft --config "${CONFIG:-examples/tiny-chat/sft.yaml}" \
    --max_steps 6 --logging_steps 1 --eval_steps 3 --peak_flops 1e12 --dataset_cache_dir none --output_dir "$out" "$@" \
    >"$out.log" 2>&1
  local rc=$?
  check "$(basename "$out") trains (exit $rc)" "$rc"
  [ "$rc" -eq 0 ] || tail -5 "$out.log" | sed 's/^/    /'
}

same() {  # same A B: the same mesh and sharding, and every logged number bit for bit
  local layout_a layout_b
  layout_a=$(grep -o 'mesh [^;]*; sharding [a-z0-9]*' "$1.log")
  layout_b=$(grep -o 'mesh [^;]*; sharding [a-z0-9]*' "$2.log")
  check "$(basename "$2") layout '$layout_b' = $(basename "$1")'s" $([ -n "$layout_a" ] && [ "$layout_a" = "$layout_b" ]; echo $?)
  python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PY'
import json, sys
def rows(p):
    return {(r["step"], "eval_loss" in r): {k: r[k] for k in ("loss", "grad_norm", "learning_rate", "eval_loss", "num_tokens") if k in r}
            for r in map(json.loads, open(p))}
a, b = rows(sys.argv[1]), rows(sys.argv[2])
assert len(a) >= 8 and a == b, [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)][:3]
PY
  check "$(basename "$2") curve = $(basename "$1")'s bit for bit" $?
}

sft "$WORK/accelerate_fsdp2" --accelerate_config fsdp2 --bf16 false
sft "$WORK/fsdp_full_shard" --fsdp "full_shard auto_wrap"
same "$WORK/accelerate_fsdp2" "$WORK/fsdp_full_shard"
check "the start line says zero3 over dp_shard 2" \
  $(grep -q "mesh dp_replicate 1 x dp_shard 2 x cp 1 x sp 1 x tp 1; sharding zero3" "$WORK/fsdp_full_shard.log"; echo $?)
check "the mapping's note, once" \
  $([ "$(grep -c "note: --fsdp 'full_shard auto_wrap': FSDP2 FULL_SHARD -> --sharding zero3" "$WORK/fsdp_full_shard.log")" -eq 1 ]; echo $?)

# SHARD_GRAD_OP (ZeRO-2): --fsdp's word against accelerate's reshard_after_forward false; and from a YAML list.
printf 'distributed_type: FSDP\nmixed_precision: "no"\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: false\n' \
  >"$WORK/grad_op.yaml"
sft "$WORK/accelerate_grad_op" --accelerate_config "$WORK/grad_op.yaml"
printf '{"fsdp_version": 2, "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "fsdp_state_dict_type": "FULL_STATE_DICT"}\n' \
  >"$WORK/fsdp_config.json"
{ cat examples/tiny-chat/sft.yaml; printf 'fsdp: [shard_grad_op, auto_wrap]\nfsdp_config: %s\n' "$WORK/fsdp_config.json"; } \
  >"$WORK/run.yaml"
CONFIG="$WORK/run.yaml" sft "$WORK/fsdp_grad_op"
same "$WORK/accelerate_grad_op" "$WORK/fsdp_grad_op"
check "shard_grad_op is zero2" $(grep -q "sharding zero2" "$WORK/fsdp_grad_op.log"; echo $?)

# Offload: --fsdp "full_shard offload" against accelerate's fsdp_offload_params true.
printf 'distributed_type: FSDP\nmixed_precision: "no"\nfsdp_config:\n  fsdp_version: 2\n  fsdp_offload_params: true\n' \
  >"$WORK/offload.yaml"
sft "$WORK/accelerate_offload" --accelerate_config "$WORK/offload.yaml"
sft "$WORK/fsdp_offload" --fsdp "full_shard offload"
same "$WORK/accelerate_offload" "$WORK/fsdp_offload"
same "$WORK/accelerate_fsdp2" "$WORK/fsdp_offload"  # offload changes no bit

# A contradiction: both ranks stop at once with the same message naming both sources.
timeout 120 "$MPIRUN" --oversubscribe --bind-to none -np 2 "$TRLHPC" sft --config examples/tiny-chat/sft.yaml \
  --max_steps 2 --output_dir "$WORK/bad" --fsdp full_shard --accelerate_config zero2 >"$WORK/bad.log" 2>&1
rc=$?
check "--fsdp full_shard with --accelerate_config zero2: exit 1 (got $rc)" $([ "$rc" -eq 1 ]; echo $?)
check "the message names both" $(grep -q "contradicts --accelerate_config zero2" "$WORK/bad.log"; echo $?)
check "no training began" $(! grep -q "^step 1" "$WORK/bad.log"; echo $?)

e2e_end
