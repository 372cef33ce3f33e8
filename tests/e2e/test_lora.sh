#!/usr/bin/env bash
# LoRA (--use_peft) against TRL SFTTrainer + PEFT on the same adapter (tests/fixtures/lora_curves/, written by
# tests/fixtures/make_lora_curves.py: a peft-made adapter with non-zero A and B on all seven linears of the
# tiny Qwen2 of trl_curves, and TRL's curve training it for 6 steps):
#  1. trlhpc continues that adapter (given as --model_name_or_path, as transformers' PEFT integration does)
#     on 1 rank and on every layout: DDP 2, ZeRO-1 2, ZeRO-2 2, ZeRO-3 2, tp 2, tp 2 + tp sequence
#     parallel, cp 2, sp 2, ZeRO-3 2 x tp 2, accelerate's fsdp2 profile. Every
#     step's loss within 1e-6 and grad_norm within 2e-5 relative of TRL's. Why these bounds: the same as
#     test_trl_curves.sh (both sides train the same tokens from the same weights; only fp32 summation order
#     differs). Measured (2026-12-03, AMD EPYC Zen 5): loss <= 4.3e-8, grad_norm <= 6.4e-7 on every layout.
#     Negative control: a 1 % larger learning rate must fall outside the bounds.
#  2. The saved output is a PEFT adapter directory (adapter_config.json naming the base,
#     adapter_model.safetensors with PEFT's keys and shapes, the tokenizer files) and no model.safetensors;
#     the start line says what trains. A ZeRO-3 x tp 2 run saves the same adapter as the 1-rank run.
#  3. A checkpoint of a LoRA run resumes exactly, also on another layout (tp 2 from a 1-rank checkpoint).
#  4. Fresh adapters (PEFT's init) on a model with one kv head, so tp 2 shares it (kv-replicated k/v adapter
#     B factors summed over the sharing ranks), with gradient checkpointing and rsLoRA: tp 2, ZeRO-3 2 and
#     cp 2 equal to trlhpc's 1-rank run within the bounds of 1. With --lora_dropout 0.1 (trlhpc's own mask:
#     torch's RNG cannot be matched, so not against TRL) tp 2, cp 2, ZeRO-3 2 and sp 2 with padding-free
#     micro-batches draw the 1-rank run's mask (same bounds), and the dropout run differs from the plain one.
#  5. generate of an adapter directory gives PEFT's greedy continuation (transformers' generate of the
#     PeftModel, in the fixture); `export ADAPTER --merge` writes W + scale B A (checked here from the two
#     files) and generates the same; a LoRA checkpoint exports as its adapter (and --merge as the model).
#     Peer check (runs only where peft, torch and transformers import, and says SKIP otherwise): PEFT loads
#     the adapter trlhpc saved and its greedy continuation equals `trlhpc generate` of it; the merged export
#     equals PEFT's merge_and_unload of the fixture adapter.
#  6. Bad input, each exit 1 with the message naming the option or file, before any training:
#     a target module that matches nothing, --lora_r 0, --use_dora, --lora_dropout 1,
#     an adapter whose tensors do not fit the base, an adapter whose base does not exist.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
source "$ROOT/tests/e2e/lora_lib.sh"
FIXTURE=tests/fixtures/lora_curves
ADAPTER=$FIXTURE/initial_adapter

echo "1. trlhpc against TRL + PEFT, on 1 rank and every layout"
check_layout one 1
check_layout ddp 2 --per_device_train_batch_size=1
check_layout zero1 2 --sharding zero1 --per_device_train_batch_size=1
check_layout zero2 2 --sharding zero2 --per_device_train_batch_size=1
check_layout zero3 2 --sharding zero3 --per_device_train_batch_size=1
check_layout tp2 2 --tp_size 2
check_layout tp2_sp 2 --tp_size 2 --tp_sequence_parallel
check_layout cp2 2 --cp_size 2
check_layout sp2 2 --sp_size 2
check_layout zero3_tp2 4 --sharding zero3 --tp_size 2 --per_device_train_batch_size=1
# The bundled FSDP2 accelerate profile (fully_shard, reshard after forward) for 2 ranks, fp32 to compare with TRL's fp32 curve.
sed 's/^num_processes: .*/num_processes: 2/' configs/fsdp2.yaml >"$WORK/fsdp2.yaml"
check_layout fsdp2 2 --accelerate_config "$WORK/fsdp2.yaml" --bf16 false --per_device_train_batch_size=1
echo "  negative control: --learning_rate 3.03e-3 (1 % larger)"
if run lr_off 1 --learning_rate=3.03e-3 && compare "$FIXTURE/curves.json" "$WORK/lr_off/metrics.jsonl"; then
  fail "a 1 % larger learning rate stays within the bounds: the comparison cannot fail"
fi

echo "2. the output is a PEFT adapter directory"
grep -q "LoRA r 8 on .*trainable 18688 of 169664 parameters.*base frozen" "$WORK/one.log" ||
  fail "the start line does not say what trains"
python3 - "$WORK/one" "$WORK/zero3_tp2" "$ADAPTER" <<'PY' || fail "the saved adapter directory is not PEFT's"
import json, os, struct, sys
out, sharded, initial = sys.argv[1:4]
def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        h.pop("__metadata__", None)
        return h, f.read()
for d in (out, sharded):
    assert os.path.isfile(f"{d}/adapter_model.safetensors") and not os.path.exists(f"{d}/model.safetensors"), d
    assert os.path.isfile(f"{d}/tokenizer.json"), d
config = json.load(open(f"{out}/adapter_config.json"))
assert config["peft_type"] == "LORA" and config["task_type"] == "CAUSAL_LM", config
assert config["r"] == 8 and config["lora_alpha"] == 16 and config["use_dora"] is False, config
assert sorted(config["target_modules"]) == sorted(json.load(open(f"{initial}/adapter_config.json"))["target_modules"])
assert os.path.isdir(config["base_model_name_or_path"]), config["base_model_name_or_path"]
mine, data = header(f"{out}/adapter_model.safetensors")
theirs, start = header(f"{initial}/adapter_model.safetensors")
assert {k: v["shape"] for k, v in mine.items()} == {k: v["shape"] for k, v in theirs.items()}, "keys/shapes differ"
assert all(v["dtype"] == "F32" for v in mine.values())
assert data != start, "the saved adapter equals the initial one: nothing trained"
_, sharded_data = header(f"{sharded}/adapter_model.safetensors")
import array
a, b = array.array("f", data), array.array("f", sharded_data)
worst = max(abs(x - y) / max(1e-3, abs(x)) for x, y in zip(a, b))
assert worst < 1e-4, f"ZeRO-3 x tp 2 saved another adapter: {worst:.1e}"
print(f"    {len(mine)} tensors, PEFT keys; ZeRO-3 x tp 2's adapter equal to 1 rank's within {worst:.1e}")
PY

echo "3. a LoRA checkpoint resumes exactly, also on another layout"
if run ckpt 1 --save_steps 3; then
  rm -rf "$WORK/ckpt/checkpoint-6"
  for layout in one:1 tp2:2; do
    name=${layout%%:*}
    np=${layout##*:}
    flags=()
    [[ $name == tp2 ]] && flags=(--tp_size 2)
    cp -r "$WORK/ckpt" "$WORK/resume_$name"
    if "${MPI[@]}" -np "$np" "$TRLHPC" sft --model_name_or_path "$ADAPTER" "${SETTINGS[@]}" "${flags[@]}" \
      --output_dir "$WORK/resume_$name" --resume_from_checkpoint "$WORK/resume_$name/checkpoint-3" \
      >"$WORK/resume_$name.log" 2>&1; then
      same_steps_4_to_6 "$WORK/ckpt/metrics.jsonl" "$WORK/resume_$name/metrics.jsonl" || fail "resume on $name differs"
    else
      fail "resume on $name: exit $?"
      tail -5 "$WORK/resume_$name.log"
    fi
  done
else
  fail "the checkpointed run failed"
fi

echo "4. fresh adapters (PEFT's init, B = 0) on a one-kv-head model: tp 2 shares the kv head (kv-replicated k/v"
echo "   adapters), gradient checkpointing, rsLoRA; every layout equal to the 1-rank run (bounds of 1.)"
python3 - examples/tiny-chat/config.json "$WORK/kv1.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(num_key_value_heads=1, hidden_size=64, intermediate_size=176, num_hidden_layers=2)
json.dump(c, open(sys.argv[2], "w"))
PY
FRESH=(--model_config "$WORK/kv1.json" --tokenizer examples/tiny-chat --use_peft --lora_dropout 0 --lora_r 4
  --lora_alpha 8 --use_rslora --lora_target_modules all-linear --gradient_checkpointing)
fresh() {
  local name=$1 np=$2
  shift 2
  "${MPI[@]}" -np "$np" "$TRLHPC" sft "${SETTINGS[@]}" "${FRESH[@]}" --output_dir "$WORK/$name" "$@" >"$WORK/$name.log" 2>&1 ||
    { fail "$name: exit $?"; tail -3 "$WORK/$name.log"; }
}
fresh fresh_one 1
python3 - "$WORK/fresh_one/metrics.jsonl" "$WORK/fresh_ref.json" <<'PY'
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if "grad_norm" in r]
json.dump({"steps": steps}, open(sys.argv[2], "w"))
assert steps[-1]["loss"] < steps[0]["loss"], "the fresh adapters did not learn"
PY
for layout in "tp2_kv:2:--tp_size 2" "zero3_kv:2:--sharding zero3 --per_device_train_batch_size=1" "cp2_kv:2:--cp_size 2"; do
  IFS=: read -r name np flags <<<"$layout"
  fresh "$name" "$np" $flags
  grep -q "mesh .*tp 2" "$WORK/$name.log" || [[ $name != tp2_kv ]] || fail "$name: not a tp 2 mesh"
  echo "  $name (np $np $flags)"
  compare "$WORK/fresh_ref.json" "$WORK/$name/metrics.jsonl" || fail "$name: differs from the 1-rank run"
done

echo "   --lora_dropout 0.1 (trlhpc's mask, keyed by each token's dataset row and column): every layout draws"
echo "   the same mask, so each equals the 1-rank dropout run; and dropout changes the curve"
fresh drop_one 1 --lora_dropout 0.1
python3 - "$WORK/drop_one/metrics.jsonl" "$WORK/drop_ref.json" "$WORK/fresh_ref.json" <<'PY' || fail "dropout has no effect"
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if "grad_norm" in r]
json.dump({"steps": steps}, open(sys.argv[2], "w"))
plain = json.load(open(sys.argv[3]))["steps"]
d = max(abs(a["grad_norm"] - b["grad_norm"]) / b["grad_norm"] for a, b in zip(steps, plain))
print(f"    dropout moves grad_norm by up to {d:.1e} relative")
assert d > 1e-3
PY
for layout in "drop_tp2:2:--tp_size 2" "drop_cp2:2:--cp_size 2" "drop_zero3:2:--sharding zero3 --per_device_train_batch_size=1" \
  "drop_sp2_pf:2:--sp_size 2 --padding_free"; do
  IFS=: read -r name np flags <<<"$layout"
  fresh "$name" "$np" --lora_dropout 0.1 $flags
  echo "  $name (np $np $flags)"
  compare "$WORK/drop_ref.json" "$WORK/$name/metrics.jsonl" || fail "$name: another dropout mask than 1 rank's"
done

echo "5. generate and export --merge of an adapter"
PROMPT="$(python3 -c "import json; print(json.load(open('$FIXTURE/merged_logits.json'))['prompt'], end='')")"$'\n'
greedy_equal "$ADAPTER" "$PROMPT"
"$TRLHPC" export "$ADAPTER" --merge --output_dir "$WORK/merged" >"$WORK/merge.log" 2>&1 || fail "export --merge: $(tail -1 "$WORK/merge.log")"
greedy_equal "$WORK/merged" "$PROMPT"
# The merged weights are W + (alpha / r) B A, computed here independently from the two files.
python3 - "$ROOT/tests/fixtures/trl_curves/model/model.safetensors" "$ADAPTER/adapter_model.safetensors" \
  "$WORK/merged/model.safetensors" <<'PY' || fail "the merged weights are not W + scale B A"
import array, json, struct, sys
def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", (path, name)
        b, e = info["data_offsets"]
        out[name] = (info["shape"], array.array("f", data[b:e]))
    return out
base, adapter, merged = map(load, sys.argv[1:4])
scale, worst, checked = 16 / 8, 0.0, 0
for name, (shape, w) in base.items():
    got = merged[name][1]
    key = "base_model.model." + name.replace(".weight", "")
    if key + ".lora_A.weight" not in adapter:
        assert got == w, f"{name} changed although it has no adapter"
        continue
    (r, cols), A = adapter[key + ".lora_A.weight"]
    _, B = adapter[key + ".lora_B.weight"]
    for i in range(shape[0]):
        for j in range(shape[1]):
            want = w[i * cols + j] + scale * sum(B[i * r + k] * A[k * cols + j] for k in range(r))
            worst = max(worst, abs(got[i * cols + j] - want) / max(abs(want), 1e-3))
    checked += 1
assert checked == 14 and worst < 1e-5, (checked, worst)
print(f"    {checked} merged weights = W + scale B A within {worst:.1e}; the others unchanged")
PY
echo "  a LoRA checkpoint exports as its adapter, and --merge as the merged model"
"$TRLHPC" export "$WORK/ckpt/checkpoint-3" --output_dir "$WORK/ckpt_adapter" >"$WORK/export.log" 2>&1 &&
  [[ -f $WORK/ckpt_adapter/adapter_model.safetensors && -f $WORK/ckpt_adapter/adapter_config.json ]] ||
  fail "export of a LoRA checkpoint: $(tail -1 "$WORK/export.log")"
"$TRLHPC" export "$WORK/ckpt/checkpoint-3" --merge --output_dir "$WORK/ckpt_merged" >"$WORK/export.log" 2>&1 &&
  [[ -f $WORK/ckpt_merged/model.safetensors && ! -e $WORK/.ckpt_merged.adapter ]] ||
  fail "export --merge of a LoRA checkpoint: $(tail -1 "$WORK/export.log")"
"$TRLHPC" generate "$WORK/ckpt_adapter" --prompt "$PROMPT" --raw_prompt --max_new_tokens 4 >/dev/null 2>"$WORK/gen.err" ||
  fail "generate of an exported adapter: $(tail -1 "$WORK/gen.err")"

echo "  peer: the adapter trlhpc saved, loaded by PEFT, continues the prompt as trlhpc generate does"
if python3 -c "import peft, torch, transformers" 2>/dev/null; then
  "$TRLHPC" generate "$WORK/one" --prompt "$PROMPT" --raw_prompt --max_new_tokens 12 --json >"$WORK/gen_one.json" 2>"$WORK/gen.err" ||
    fail "generate of the trained adapter: $(tail -1 "$WORK/gen.err")"
  python3 - "$WORK/one" "$WORK/gen_one.json" <<'PY' || fail "PEFT does not load trlhpc's adapter as trlhpc uses it"
import json, sys
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM
adapter, generated = sys.argv[1], json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
base = json.load(open(f"{adapter}/adapter_config.json"))["base_model_name_or_path"]
model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, use_kernels=False)
model = PeftModel.from_pretrained(model, adapter).eval()
with torch.no_grad():
    out = model.generate(torch.tensor([generated["input_ids"]]), max_new_tokens=12, do_sample=False)
new = out[0, len(generated["input_ids"]):].tolist()
assert new == generated["output_ids"], (new, generated["output_ids"])
print("    PEFT's greedy continuation with trlhpc's adapter:", new)
PY
  python3 - "$ADAPTER" "$WORK/merged/model.safetensors" <<'PY' || fail "export --merge differs from PEFT's merge_and_unload"
import json, sys
import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM
adapter, merged_file = sys.argv[1:3]
base = f"{adapter}/" + json.load(open(f"{adapter}/adapter_config.json"))["base_model_name_or_path"]
model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, use_kernels=False)
theirs = PeftModel.from_pretrained(model, adapter).merge_and_unload().state_dict()
mine = load_file(merged_file)
worst = 0.0
for name, t in mine.items():
    d = (t - theirs[name]).abs().max().item() / max(theirs[name].abs().max().item(), 1e-12)
    worst = max(worst, d)
assert worst < 1e-6, worst
print(f"    trlhpc's merged export equals PEFT's merge_and_unload within {worst:.1e} (max-normalised)")
PY
else
  echo "    SKIP: peft/torch/transformers not importable here (a peer check; the fixture comparisons above ran)"
fi

echo "6. bad input: exit 1 with a message naming what to fix"
BASE=tests/fixtures/trl_curves/model
expect_error "lora_target_modules qkv_proj matches no linear module" --model_name_or_path $BASE --use_peft \
  --lora_dropout 0 --lora_target_modules q_proj qkv_proj
expect_error "lora_r 0: the adapter rank must be at least 1" --model_name_or_path $BASE --use_peft --lora_dropout 0 --lora_r 0
expect_error "use_dora: DoRA adapters are not supported" --model_name_or_path $BASE --use_peft --use_dora
expect_error "lora_dropout 1.000000 must be in \[0, 1)" --model_name_or_path $BASE --use_peft --lora_dropout 1
expect_error "LoRA on the embedding or lm_head is not supported" --model_name_or_path $BASE --use_peft \
  --lora_dropout 0 --lora_target_modules lm_head
mkdir -p "$WORK/wrong_adapter"
cp "$ADAPTER/adapter_model.safetensors" "$WORK/wrong_adapter/"
python3 - "$ADAPTER/adapter_config.json" "$WORK/wrong_adapter/adapter_config.json" "$ROOT/$BASE" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["r"] = 4  # the tensors hold rank 8: an adapter that does not fit
c["base_model_name_or_path"] = sys.argv[3]
json.dump(c, open(sys.argv[2], "w"))
PY
expect_error "has shape (8, 64), the model needs (4, 64)" --model_name_or_path "$WORK/wrong_adapter"
python3 - "$WORK/wrong_adapter/adapter_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["base_model_name_or_path"] = "/nonexistent/base"
json.dump(c, open(sys.argv[1], "w"))
PY
expect_error "base_model_name_or_path \"/nonexistent/base\" is not a model directory" --model_name_or_path "$WORK/wrong_adapter"

finish LoRA
