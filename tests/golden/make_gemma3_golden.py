#!/usr/bin/env python3
"""Golden fixture for Gemma 3 text (tests/golden/gemma3_tiny/), written as make_golden.py writes the others
(same batch layout, same float64 reference, same 5 AdamW steps). Its own script and seeds so that adding it
left the existing fixtures untouched.

Run by hand where torch and transformers 5 are installed:
    python3 tests/golden/make_gemma3_golden.py [--out DIR]
The model, Gemma3ForCausalLM (model_type gemma3_text), 3 layers with sliding_window_pattern 2
(layer_types sliding, full, sliding), sliding_window 3 (the batch's documents are 5..9 tokens, so the
window masks); 4 query heads over 2 kv heads, head_dim 16 while hidden_size / heads is 8;
query_pre_attn_scalar 24 (not head_dim, so a wrong attention scale shows); sliding layers rotate with
rope_local_base_freq 10000, full layers with rope_theta 1e6 and linear rope scaling (factor 2); GeGLU
with gelu_pytorch_tanh; tied head. The (1 + w) RMSNorm weights are drawn away from their zero init
(N(0, 0.2)) so that their gradients are not trivial.
"""
import argparse
import os

import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from make_golden import HERE, write_fixture
from make_sliding_golden import with_random_norms


def gemma3_config():
    config = Gemma3TextConfig(vocab_size=76, hidden_size=32, intermediate_size=40, num_hidden_layers=3,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                              rms_norm_eps=1e-6, initializer_range=0.2, query_pre_attn_scalar=24, sliding_window=3,
                              sliding_window_pattern=2, rope_theta=1e6, rope_local_base_freq=10000.0,
                              rope_scaling={"rope_type": "linear", "factor": 2.0})
    assert config.layer_types == ["sliding_attention", "full_attention", "sliding_attention"], config.layer_types
    assert config.hidden_activation == "gelu_pytorch_tanh"
    return config


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=HERE, help="folder for the fixtures (default: tests/golden)")
    out_root = ap.parse_args().out
    torch.manual_seed(1618)
    gen = torch.Generator().manual_seed(37)
    write_fixture(os.path.join(out_root, "gemma3_tiny"), gemma3_config(), with_random_norms(Gemma3ForCausalLM), gen)


if __name__ == "__main__":
    main()
