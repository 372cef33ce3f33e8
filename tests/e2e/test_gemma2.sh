#!/usr/bin/env bash
# Gemma 2 end to end (as tests/e2e/test_gemma3.sh for Gemma 3):
#  1. `trlhpc env --model` names Gemma2ForCausalLM, its structure (the two softcaps) and its layer pattern.
#  2. `trlhpc sft` trains a randomly initialised Gemma 2 (the shape of tests/golden/gemma2_tiny, attention
#     cap 2 and final cap 3, with the tiny-chat tokenizer's vocabulary) for 4 steps on 2 ranks, tp 2 (the
#     vocab-parallel loss on capped logits), and saves a Hugging Face directory whose config.json is a
#     gemma2 one with the caps; `trlhpc generate` continues a prompt from it.
#  3. Where torch and transformers import (the peers, optional): transformers loads the saved directory
#     (AutoModelForCausalLM, the same architecture, layer types and caps) and its greedy `generate` gives
#     the same tokens as trlhpc's.
set -u
TRLHPC=$1
MPIRUN=${2:-mpirun}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"
export OMP_NUM_THREADS=1
passed=0 failed=0
check() {  # check NAME CONDITION-EXIT-CODE
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1"; fi
}

# 1. env
"$TRLHPC" env --model tests/golden/gemma2_tiny/model > "$WORK/env.txt" 2>&1
check "env runs" $?
grep -q "Gemma2ForCausalLM" "$WORK/env.txt"; check "env names Gemma2ForCausalLM" $?
grep -q "Layers (S = sliding window 3, F = full attention, N = no RoPE): S F S F" "$WORK/env.txt"
check "env prints the layer pattern" $?
grep -q "Family gemma2: norms on the attention and MLP outputs, (1 + w) RMSNorm, GeGLU (tanh GELU), embeddings x sqrt(hidden), attention scale query_pre_attn_scalar^-0.5, attention scores softcapped at 2, final logits softcapped at 3, tied head" "$WORK/env.txt"
check "env prints the family's structure" $?

# 2. train with tp 2 and save
python3 - tests/golden/gemma2_tiny/model/config.json examples/tiny-chat/config.json "$WORK/config.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config["vocab_size"] = json.load(open(sys.argv[2]))["vocab_size"]
config["bos_token_id"] = config["eos_token_id"] = config["pad_token_id"] = None
json.dump(config, open(sys.argv[3], "w"), indent=1)
PY
timeout 600 "$MPIRUN" --oversubscribe -np 2 "$TRLHPC" sft --config examples/tiny-chat/sft.yaml \
  --model_config "$WORK/config.json" --output_dir "$WORK/out" --max_steps 4 --logging_steps 1 --eval_steps 0 \
  --max_length 128 --tp_size 2 > "$WORK/sft.log" 2>&1
rc=$?
check "sft trains Gemma 2 on tp 2" $rc
[ $rc -eq 0 ] || tail -20 "$WORK/sft.log"
python3 - "$WORK/out/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["architectures"] == ["Gemma2ForCausalLM"] and c["model_type"] == "gemma2", c
assert c["layer_types"] == ["sliding_attention", "full_attention"] * 2, c["layer_types"]
assert c["query_pre_attn_scalar"] == 20 and c["rope_theta"] == 10000.0, c
assert c["attn_logit_softcapping"] == 2.0 and c["final_logit_softcapping"] == 3.0, c
PY
check "saved config.json is a gemma2 one with the caps" $?
"$TRLHPC" generate "$WORK/out" --prompt "hello" --raw_prompt --max_new_tokens 12 --json > "$WORK/gen.json" 2> "$WORK/gen.err"
check "generate runs on the saved model" $?

# 3. transformers peer
if python3 -c "import torch, transformers" 2>/dev/null; then
  python3 - "$WORK/out" "$WORK/gen.json" <<'PY'
import json, sys
import torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32, use_kernels=False).eval()
assert type(model).__name__ == "Gemma2ForCausalLM", type(model).__name__
assert model.config.attn_logit_softcapping == 2.0 and model.config.final_logit_softcapping == 3.0, model.config
assert model.config.layer_types == ["sliding_attention", "full_attention"] * 2, model.config.layer_types
got = json.load(open(sys.argv[2]))
prompt = got["input_ids"]
out = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                     max_new_tokens=len(got["output_ids"]), do_sample=False, eos_token_id=None, pad_token_id=0)
theirs = out[0, len(prompt):].tolist()
print("transformers", theirs, "trlhpc", got["output_ids"])
sys.exit(0 if theirs == got["output_ids"] else 1)
PY
  check "transformers loads the saved model and generates the same tokens" $?
else
  echo "transformers peer check skipped: torch/transformers not importable"
fi

echo "passed $passed failed $failed"
[ "$failed" -eq 0 ]
