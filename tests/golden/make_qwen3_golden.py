#!/usr/bin/env python3
"""The Qwen3 golden fixture (tests/golden/qwen3_tiny), written as make_golden.py writes the others.

Its own script and seeds so that adding it left the qwen2_tiny / llama_tiny fixtures untouched.
Run by hand where torch and transformers (>= 4.51, with Qwen3) are installed:
    python3 tests/golden/make_qwen3_golden.py [--out DIR]
The model: head_dim 16 while hidden_size / num_attention_heads is 8 (q/k/v are wider than the
residual stream), 2 kv heads for 4 query heads, tied embeddings, no attention bias, and q_norm / k_norm
weights drawn away from their all-ones init so their gradients and effect are not trivial.
"""
import argparse
import os

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from make_golden import HERE, write_fixture


def qwen3_with_random_norms(config):
    """A fresh Qwen3ForCausalLM whose RMSNorm weights are 1 + N(0, 0.2) (saved as such)."""
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.2 * torch.randn_like(p))
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=HERE, help="folder for the fixtures (default: tests/golden)")
    out_root = ap.parse_args().out
    torch.manual_seed(4321)
    gen = torch.Generator().manual_seed(77)
    config = Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                         rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True, attention_bias=False,
                         initializer_range=0.2, use_sliding_window=False)
    write_fixture(os.path.join(out_root, "qwen3_tiny"), config, qwen3_with_random_norms, gen)


if __name__ == "__main__":
    main()
