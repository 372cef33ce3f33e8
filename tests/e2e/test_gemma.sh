#!/usr/bin/env bash
# Gemma 2 and Gemma 3 text end to end, the same steps for each (tests/golden/gemma2_tiny, gemma3_tiny):
#  1. `trlhpc env --model` names the architecture, the family's structure (Gemma 2: the two softcaps) and
#     the layer pattern (sliding / full).
#  2. `trlhpc sft` trains a randomly initialised model of the fixture's shape (with the tiny-chat
#     tokenizer's vocabulary) for 4 steps on 2 ranks, tp 2 (the vocab-parallel loss; Gemma 2 on capped
#     logits), and saves a Hugging Face directory whose config.json is the family's, with its own fields
#     (Gemma 2: caps 2 and 3; Gemma 3: query_pre_attn_scalar, the local RoPE base, linear RoPE scaling);
#     `trlhpc generate` continues a prompt from it.
#  3. Where torch and transformers import (the peers, optional): transformers loads the saved directory
#     (AutoModelForCausalLM, the same architecture and fields) and its greedy `generate` gives the same
#     tokens as trlhpc's. (tests/e2e/test_family_export.sh does step 3 for every family; here the
#     family-specific fields are checked too.)
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
peers=0
python3 -c "import torch, transformers" 2>/dev/null && peers=1

# gemma_case NAME FIXTURE ARCHITECTURE LAYER_PATTERN STRUCTURE CONFIG_ASSERTS PEER_ASSERTS
#   CONFIG_ASSERTS: python on `c` (the saved config.json); PEER_ASSERTS: python on `model` (transformers').
gemma_case() {
  local name=$1 fixture=$2 arch=$3 pattern=$4 structure=$5 config_asserts=$6 peer_asserts=$7
  local w="$WORK/$name"
  mkdir -p "$w"
  # 1. env
  "$TRLHPC" env --model "tests/golden/$fixture/model" > "$w/env.txt" 2>&1
  check "$name: env runs" $?
  grep -q "$arch" "$w/env.txt"; check "$name: env names $arch" $?
  grep -q "Layers (S = sliding window 3, F = full attention, N = no RoPE): $pattern\$" "$w/env.txt"
  check "$name: env prints the layer pattern $pattern" $?
  grep -qF "$structure" "$w/env.txt"; check "$name: env prints the family's structure" $?

  # 2. train with tp 2 and save
  python3 - "tests/golden/$fixture/model/config.json" examples/tiny-chat/config.json "$w/config.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
config["vocab_size"] = json.load(open(sys.argv[2]))["vocab_size"]
config["bos_token_id"] = config["eos_token_id"] = config["pad_token_id"] = None
json.dump(config, open(sys.argv[3], "w"), indent=1)
PY
  timeout 600 "$MPIRUN" --oversubscribe -np 2 "$TRLHPC" sft --config examples/tiny-chat/sft.yaml \
    --model_config "$w/config.json" --output_dir "$w/out" --max_steps 4 --logging_steps 1 --eval_steps 0 \
    --max_length 128 --tp_size 2 > "$w/sft.log" 2>&1
  local rc=$?
  check "$name: sft trains on tp 2" $rc
  [ $rc -eq 0 ] || tail -20 "$w/sft.log"
  python3 -c "import json, sys
c = json.load(open(sys.argv[1]))
$config_asserts" "$w/out/config.json"
  check "$name: the saved config.json has the family's fields" $?
  "$TRLHPC" generate "$w/out" --prompt "hello" --raw_prompt --max_new_tokens 12 --json > "$w/gen.json" 2> "$w/gen.err"
  check "$name: generate runs on the saved model" $?

  # 3. transformers peer
  if [ $peers -eq 0 ]; then
    echo "$name: transformers peer check skipped: torch/transformers not importable"
    return
  fi
  python3 -c "import json, sys
import torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32, use_kernels=False).eval()
assert type(model).__name__ == '$arch', type(model).__name__
$peer_asserts
got = json.load(open(sys.argv[2]))
prompt = got['input_ids']
out = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                     max_new_tokens=len(got['output_ids']), do_sample=False, eos_token_id=None, pad_token_id=0)
theirs = out[0, len(prompt):].tolist()
print('$name: transformers', theirs, 'trlhpc', got['output_ids'])
sys.exit(0 if theirs == got['output_ids'] else 1)" "$w/out" "$w/gen.json"
  check "$name: transformers loads the saved model and generates the same tokens" $?
}

gemma_case gemma2 gemma2_tiny Gemma2ForCausalLM "S F S F" \
  "Family gemma2: norms on the attention and MLP outputs, (1 + w) RMSNorm, GeGLU (tanh GELU), embeddings x sqrt(hidden), attention scale query_pre_attn_scalar^-0.5, attention scores softcapped at 2, final logits softcapped at 3, tied head" \
  'assert c["architectures"] == ["Gemma2ForCausalLM"] and c["model_type"] == "gemma2", c
assert c["layer_types"] == ["sliding_attention", "full_attention"] * 2, c["layer_types"]
assert c["query_pre_attn_scalar"] == 20 and c["rope_theta"] == 10000.0, c
assert c["attn_logit_softcapping"] == 2.0 and c["final_logit_softcapping"] == 3.0, c' \
  'assert model.config.attn_logit_softcapping == 2.0 and model.config.final_logit_softcapping == 3.0, model.config
assert model.config.layer_types == ["sliding_attention", "full_attention"] * 2, model.config.layer_types'

gemma_case gemma3 gemma3_tiny Gemma3ForCausalLM "S F S" \
  "Family gemma3_text: q/k norms, norms on the attention and MLP outputs, (1 + w) RMSNorm, GeGLU (tanh GELU), embeddings x sqrt(hidden)" \
  'assert c["architectures"] == ["Gemma3ForCausalLM"] and c["model_type"] == "gemma3_text", c
assert c["layer_types"] == ["sliding_attention", "full_attention", "sliding_attention"], c["layer_types"]
assert c["query_pre_attn_scalar"] == 24 and c["rope_local_base_freq"] == 10000.0, c
assert c["rope_scaling"] == {"rope_type": "linear", "factor": 2.0}, c["rope_scaling"]' \
  'assert model.config.layer_types == ["sliding_attention", "full_attention", "sliding_attention"], model.config.layer_types'

e2e_end
