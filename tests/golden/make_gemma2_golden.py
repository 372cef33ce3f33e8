#!/usr/bin/env python3
"""Golden fixture for Gemma 2 (tests/golden/gemma2_tiny/), written as make_golden.py writes the others
(same batch layout, same float64 reference, same 5 AdamW steps). Its own script and seeds so that adding it
left the existing fixtures untouched.

Run by hand where torch and transformers 5 are installed:
    python3 tests/golden/make_gemma2_golden.py [--out DIR] [--stats]
The model, Gemma2ForCausalLM (model_type gemma2), 4 layers with layer_types derived by Gemma2Config
(sliding, full, sliding, full), sliding_window 3 (the batch's documents are 5..9 tokens, so the window
masks); 4 query heads over 2 kv heads, head_dim 16 while hidden_size / heads is 8; query_pre_attn_scalar 20
(not head_dim, so a wrong attention scale shows); one rope_theta (10000) for every layer; GeGLU with
gelu_pytorch_tanh; tied head; no q/k norms. The softcaps are small so that tanh saturates:
attn_logit_softcapping 2.0 on scores of standard deviation ~1, final_logit_softcapping 3.0 on logits of
standard deviation ~1.5; --stats prints how many scaled scores and logits lie beyond half the cap (where
cap * tanh(x / cap) is more than 8% below x), so that a missing or misplaced cap is visible in the fixture.
The (1 + w) RMSNorm weights are drawn away from their zero init (N(0, 0.2)) so that their gradients are
not trivial.
"""
import argparse
import os

import torch
import transformers.models.gemma2.modeling_gemma2 as modeling_gemma2
from transformers import Gemma2Config, Gemma2ForCausalLM

from make_golden import HERE, make_batch, write_fixture
from make_sliding_golden import with_random_norms

ATTN_CAP = 2.0
FINAL_CAP = 3.0


def gemma2_config():
    config = Gemma2Config(vocab_size=84, hidden_size=32, intermediate_size=40, num_hidden_layers=4,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                          rms_norm_eps=1e-6, initializer_range=0.2, query_pre_attn_scalar=20, sliding_window=3,
                          attn_logit_softcapping=ATTN_CAP, final_logit_softcapping=FINAL_CAP)
    assert config.layer_types == ["sliding_attention", "full_attention"] * 2, config.layer_types
    assert config.hidden_activation == "gelu_pytorch_tanh" and config.tie_word_embeddings
    assert config.rope_parameters["rope_theta"] == 10000.0, config.rope_parameters
    return config


def saturation_stats(model, ids, docs):
    """Counts of the scaled attention scores (allowed pairs only) and of the logits beyond half their cap."""
    counts = {"scores": [0, 0], "logits": [0, 0]}
    eager = modeling_gemma2.eager_attention_forward

    def counting_attention(module, query, key, value, attention_mask, scaling=None, softcap=None, **kwargs):
        keys = modeling_gemma2.repeat_kv(key, module.num_key_value_groups)
        scores = torch.matmul(query, keys.transpose(2, 3)) * scaling
        allowed = torch.ones_like(scores, dtype=torch.bool)
        if attention_mask is not None:  # additive: 0 where allowed
            allowed = allowed & (attention_mask == 0)
        counts["scores"][0] += int((scores.abs() > 0.5 * softcap)[allowed].sum())
        counts["scores"][1] += int(allowed.sum())
        return eager(module, query, key, value, attention_mask, scaling=scaling, softcap=softcap, **kwargs)

    def count_logits(_module, _inputs, output):  # lm_head's output, before the final cap
        counts["logits"][0] += int((output.abs() > 0.5 * model.config.final_logit_softcapping).sum())
        counts["logits"][1] += output.numel()

    modeling_gemma2.eager_attention_forward = counting_attention
    hook = model.lm_head.register_forward_hook(count_logits)
    try:
        with torch.no_grad():
            for r, row in enumerate(docs):
                for a, b in row:
                    model(input_ids=ids[r:r + 1, a:b])
    finally:
        modeling_gemma2.eager_attention_forward = eager
        hook.remove()
    for what, (beyond, total) in counts.items():
        print(f"{what} beyond half the cap: {beyond} of {total}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=HERE, help="folder for the fixtures (default: tests/golden)")
    ap.add_argument("--stats", action="store_true", help="also print the saturation counts of the initial model")
    args = ap.parse_args()
    torch.manual_seed(1414)
    gen = torch.Generator().manual_seed(41)
    out_dir = os.path.join(args.out, "gemma2_tiny")
    write_fixture(out_dir, gemma2_config(), with_random_norms(Gemma2ForCausalLM), gen)
    if args.stats:  # the saved (initial) weights on the fixture's batch, drawn again from the same seed
        model = Gemma2ForCausalLM.from_pretrained(os.path.join(out_dir, "model"), dtype=torch.float64).eval()
        ids, _, _, _, docs = make_batch(model.config.vocab_size, torch.Generator().manual_seed(41))
        saturation_stats(model, ids, docs)


if __name__ == "__main__":
    main()
