#!/usr/bin/env bash
# LoRA with modules_to_save (--lora_modules_to_save; PEFT's trained copies of whole modules) against TRL
# SFTTrainer + PEFT (tests/fixtures/lora_curves/modules_to_save/, written by tests/fixtures/make_lora_curves.py:
# the adapter of test_lora.sh plus copies of embed_tokens, lm_head and model.norm, moved off the base by
# seeded noise, on the tiny tied Qwen2 of trl_curves, so the head and embedding copies are two tensors):
#  1. trlhpc continues that adapter on 1 rank and on DDP 2, ZeRO-2 2, ZeRO-3 2, tp 2, tp 2 + SP, cp 2,
#     sp 2, ZeRO-3 2 x tp 2: every step's loss within 1e-6 and grad_norm within 2e-5 relative of TRL's
#     (lora_lib.sh says why). Measured (2026-12-04, AMD EPYC Zen 5): see the printed worst values.
#     Negative control: the same run reading the initial adapter without its copies (the base's modules,
#     as if the copies were ignored) falls outside the bounds.
#  2. The saved adapter holds PEFT's keys for the copies (base_model.model.lm_head.weight, ...) and
#     modules_to_save in its config; the trained head copy differs from the trained embedding copy, and
#     ZeRO-3 x tp 2 saves the 1-rank adapter.
#  3. A checkpoint resumes exactly on the same layout and on tp 2.
#  4. Fresh adapters (PEFT's init: B = 0, copies = the base's modules) on the pretrained model and on a
#     --model_config random init: the first step's loss equals full fine-tuning's (the copies start from
#     the right tensors, the tied head included), and ZeRO-3 2 and tp 2 equal 1 rank.
#  5. generate of the adapter directory gives PEFT's greedy continuation; export --merge writes an untied
#     model (tie_word_embeddings false, lm_head.weight = the head copy, embedding and norm = their copies)
#     that generates the same; a checkpoint exports as an adapter with the copies. Peer check (skips
#     visibly without peft/torch/transformers): PEFT loads trlhpc's trained adapter and generates as
#     trlhpc does.
#  6. Bad input, exit 1 naming the option or file: a module inside the layers (input_layernorm, and
#     "norm", which PEFT would match to every layer's norms), a name matching nothing, an adapter config
#     with ensure_weight_tying, an adapter file missing a copy.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
source "$ROOT/tests/e2e/lora_lib.sh"
FIXTURE=tests/fixtures/lora_curves/modules_to_save
ADAPTER=$FIXTURE/initial_adapter
BASE=tests/fixtures/trl_curves/model


echo "1. trlhpc against TRL + PEFT with modules_to_save, on 1 rank and every layout"
check_layout one 1
check_layout ddp 2 --per_device_train_batch_size=1
check_layout zero2 2 --sharding zero2 --per_device_train_batch_size=1
check_layout zero3 2 --sharding zero3 --per_device_train_batch_size=1
check_layout tp2 2 --tp_size 2
check_layout tp2_sp 2 --tp_size 2 --tp_sequence_parallel
check_layout cp2 2 --cp_size 2
check_layout sp2 2 --sp_size 2
check_layout zero3_tp2 4 --sharding zero3 --tp_size 2 --per_device_train_batch_size=1
echo "  negative control: the adapter without its copies (the base's modules train instead)"
mkdir -p "$WORK/no_copies"
python3 - "$ADAPTER" "$WORK/no_copies" "$ROOT/$BASE" <<'PY'
import json, struct, sys
src, dst, base = sys.argv[1:4]
with open(f"{src}/adapter_model.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
header.pop("__metadata__", None)
# The copies replaced by the base's own tensors: what a trainer that ignored the saved copies would train.
with open(f"{base}/model.safetensors", "rb") as f:
    m = struct.unpack("<Q", f.read(8))[0]
    base_header = json.loads(f.read(m))
    base_data = f.read()
out, blob = {}, b""
for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    b, e = info["data_offsets"]
    chunk = data[b:e]
    if "lora_" not in name:
        base_name = name.removeprefix("base_model.model.")
        base_name = "model.embed_tokens.weight" if base_name == "lm_head.weight" else base_name
        bb, be = base_header[base_name]["data_offsets"]
        chunk = base_data[bb:be]
    out[name] = {"dtype": "F32", "shape": info["shape"], "data_offsets": [len(blob), len(blob) + len(chunk)]}
    blob += chunk
head = json.dumps(out).encode()
with open(f"{dst}/adapter_model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(head)) + head + blob)
config = json.load(open(f"{src}/adapter_config.json"))
config["base_model_name_or_path"] = base
json.dump(config, open(f"{dst}/adapter_config.json", "w"))
PY
if "$TRLHPC" sft --model_name_or_path "$WORK/no_copies" "${SETTINGS[@]}" --output_dir "$WORK/no_copies_run" \
  >"$WORK/no_copies_run.log" 2>&1 && compare "$FIXTURE/curves.json" "$WORK/no_copies_run/metrics.jsonl"; then
  fail "training the base's modules instead of the copies stays within the bounds: the comparison cannot fail"
fi

echo "2. the saved adapter holds the copies under PEFT's keys"
grep -q "LoRA r 8 on .* + embed_tokens,lm_head,model.norm in full: trainable 135232 of 286208 parameters" "$WORK/one.log" ||
  fail "the start line does not say what trains: $(grep -o 'LoRA r[^;]*' "$WORK/one.log")"
python3 - "$WORK/one" "$WORK/zero3_tp2" "$ADAPTER" <<'PY' || fail "the saved adapter is not PEFT's with modules_to_save"
import array, json, struct, sys
out, sharded, initial = sys.argv[1:4]
def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        data = f.read()
    h.pop("__metadata__", None)
    return {k: (v["shape"], array.array("f", data[v["data_offsets"][0]:v["data_offsets"][1]])) for k, v in h.items()}
config = json.load(open(f"{out}/adapter_config.json"))
assert config["modules_to_save"] == ["embed_tokens", "lm_head", "model.norm"], config["modules_to_save"]
mine, theirs = load(f"{out}/adapter_model.safetensors"), load(f"{initial}/adapter_model.safetensors")
assert {k: v[0] for k, v in mine.items()} == {k: v[0] for k, v in theirs.items()}, "keys/shapes differ"
copies = ["base_model.model.model.embed_tokens.weight", "base_model.model.lm_head.weight", "base_model.model.model.norm.weight"]
for k in copies:
    assert mine[k][1] != theirs[k][1], f"{k} did not train"
assert mine[copies[0]][1] != mine[copies[1]][1], "the head and embedding copies are one tensor"
sharded_t = load(f"{sharded}/adapter_model.safetensors")
worst = max(abs(x - y) / max(1e-3, abs(x)) for k in mine for x, y in zip(mine[k][1], sharded_t[k][1]))
assert worst < 1e-4, f"ZeRO-3 x tp 2 saved another adapter: {worst:.1e}"
print(f"    {len(mine)} tensors with the three copies; ZeRO-3 x tp 2's adapter equal to 1 rank's within {worst:.1e}")
PY

echo "3. a checkpoint resumes exactly, also on tp 2"
if run ckpt 1 --save_steps 3; then
  for layout in one:1 tp2:2; do
    name=${layout%%:*}
    np=${layout##*:}
    flags=()
    [[ $name == tp2 ]] && flags=(--tp_size 2)
    mkdir -p "$WORK/resume_$name"
    cp -r "$WORK/ckpt/checkpoint-3" "$WORK/resume_$name/"
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

echo "4. fresh adapters: the copies start from the base's modules (first loss = full fine-tuning's)"
first_loss() { python3 -c "import json,sys; print(next(r['loss'] for r in map(json.loads, open('$1')) if 'grad_norm' in r))"; }
same_first_loss() {  # same_first_loss A B WHAT
  python3 -c "import sys; a, b = float('$1'), float('$2'); sys.exit(0 if abs(a - b) <= 1e-6 * abs(b) else 1)" ||
    { fail "$3: first loss $1, full fine-tuning's $2"; return 1; }
}
FRESH=(--use_peft --lora_dropout 0 --lora_r 4 --lora_alpha 8 --lora_target_modules all-linear
  --lora_modules_to_save embed_tokens lm_head model.norm)
for source in pretrained random; do
  model=(--model_name_or_path "$BASE")
  [[ $source == random ]] && model=(--model_config "$BASE/config.json" --tokenizer "$BASE")
  "$TRLHPC" sft "${model[@]}" "${SETTINGS[@]}" --max_steps 1 --warmup_steps 0 --output_dir "$WORK/full_$source" \
    >"$WORK/full_$source.log" 2>&1 ||
    fail "full fine-tuning ($source): $(tail -1 "$WORK/full_$source.log")"
  "$TRLHPC" sft "${model[@]}" "${SETTINGS[@]}" "${FRESH[@]}" --output_dir "$WORK/fresh_$source" >"$WORK/fresh_$source.log" 2>&1 ||
    fail "fresh adapters ($source): $(tail -1 "$WORK/fresh_$source.log")"
  same_first_loss "$(first_loss "$WORK/fresh_$source/metrics.jsonl")" "$(first_loss "$WORK/full_$source/metrics.jsonl")" \
    "fresh adapters with copies ($source)" &&
    echo "  $source: first loss $(first_loss "$WORK/fresh_$source/metrics.jsonl") = full fine-tuning's"
done
python3 -c "
import json
steps = [r for r in map(json.loads, open('$WORK/fresh_pretrained/metrics.jsonl')) if 'grad_norm' in r]
json.dump({'steps': steps}, open('$WORK/fresh_ref.json', 'w'))"
for layout in "fresh_zero3:2:--sharding zero3 --per_device_train_batch_size=1" "fresh_tp2:2:--tp_size 2"; do
  IFS=: read -r name np flags <<<"$layout"
  "${MPI[@]}" -np "$np" "$TRLHPC" sft --model_name_or_path "$BASE" "${SETTINGS[@]}" "${FRESH[@]}" $flags \
    --output_dir "$WORK/$name" >"$WORK/$name.log" 2>&1 || fail "$name: $(tail -1 "$WORK/$name.log")"
  echo "  $name (np $np $flags)"
  compare "$WORK/fresh_ref.json" "$WORK/$name/metrics.jsonl" || fail "$name: differs from the 1-rank run"
done

echo "5. generate and export --merge (untied)"
PROMPT="$(python3 -c "import json; print(json.load(open('$FIXTURE/merged_logits.json'))['prompt'], end='')")"$'\n'
greedy_equal "$ADAPTER" "$PROMPT"
"$TRLHPC" export "$ADAPTER" --merge --output_dir "$WORK/merged" >"$WORK/merge.log" 2>&1 || fail "export --merge: $(tail -1 "$WORK/merge.log")"
greedy_equal "$WORK/merged" "$PROMPT"
python3 - "$ADAPTER/adapter_model.safetensors" "$WORK/merged" <<'PY' || fail "the merged model does not carry the copies untied"
import array, json, struct, sys
def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        data = f.read()
    h.pop("__metadata__", None)
    return {k: array.array("f", data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items()}
adapter, merged = load(sys.argv[1]), load(sys.argv[2] + "/model.safetensors")
assert json.load(open(sys.argv[2] + "/config.json"))["tie_word_embeddings"] is False
for name in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"):
    assert merged[name] == adapter["base_model.model." + name], f"{name} is not the adapter's copy"
print("    untied; embed_tokens, lm_head and norm are the adapter's copies")
PY
if run ckpt_export 1 --max_steps 3 --save_steps 3 &&
  "$TRLHPC" export "$WORK/ckpt_export/checkpoint-3" --output_dir "$WORK/ckpt_adapter" >"$WORK/export.log" 2>&1; then
  cmp -s "$WORK/ckpt_adapter/adapter_model.safetensors" "$WORK/ckpt_export/adapter_model.safetensors" ||
    fail "the checkpoint's exported adapter is not the run's saved adapter"
else
  fail "export of a checkpoint with modules_to_save: $(tail -1 "$WORK/export.log" 2>/dev/null)"
fi

echo "  peer: PEFT loads the trained adapter and continues the prompt as trlhpc generate does"
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
else
  echo "    SKIP: peft/torch/transformers not importable here (a peer check; the fixture comparisons above ran)"
fi

echo "6. bad input: exit 1 with a message naming what to fix"
expect_error "lora_modules_to_save input_layernorm matches model.layers.0.input_layernorm" --model_name_or_path $BASE \
  --use_peft --lora_modules_to_save input_layernorm
expect_error "lora_modules_to_save norm matches model.layers.0.input_layernorm" --model_name_or_path $BASE \
  --use_peft --lora_modules_to_save norm
expect_error "lora_modules_to_save score matches no module" --model_name_or_path $BASE --use_peft --lora_modules_to_save score
mkdir -p "$WORK/tying" "$WORK/missing_copy"
cp "$ADAPTER/adapter_model.safetensors" "$WORK/tying/"
python3 - "$ADAPTER" "$WORK/tying" "$WORK/missing_copy" "$ROOT/$BASE" <<'PY'
import json, sys
src, tying, missing, base = sys.argv[1:5]
c = json.load(open(f"{src}/adapter_config.json"))
c["base_model_name_or_path"] = base
json.dump({**c, "ensure_weight_tying": True}, open(f"{tying}/adapter_config.json", "w"))
json.dump(c, open(f"{missing}/adapter_config.json", "w"))
PY
cp tests/fixtures/lora_curves/initial_adapter/adapter_model.safetensors "$WORK/missing_copy/"  # no copies in it
expect_error "adapter_config.json: \"ensure_weight_tying\": true is not supported" --model_name_or_path "$WORK/tying"
expect_error "no tensor base_model.model.model.embed_tokens.weight" --model_name_or_path "$WORK/missing_copy"

finish "LoRA modules_to_save"
