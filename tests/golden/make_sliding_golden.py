#!/usr/bin/env python3
"""Golden fixtures for sliding-window attention and RoPE-less layers (tests/golden/<name>/), written as
make_golden.py writes the others (same batch layout, same float64 reference, same 5 AdamW steps).

Its own script and seeds so that adding them left the existing fixtures untouched.
Run by hand where torch and transformers 5 are installed:
    python3 tests/golden/make_sliding_golden.py [--out DIR]
The models (every one: 4 query heads over 2 kv heads, head_dim 16 while hidden_size / heads is 8):
  mistral_tiny         MistralForCausalLM, sliding_window 3 on every layer (the batch's documents are 5..9
                       tokens, so the window masks), untied head
  qwen3_sliding_tiny   Qwen3ForCausalLM, 3 layers, use_sliding_window, sliding_window 4, max_window_layers 1:
                       layer 0 full attention, layers 1 and 2 sliding (layer_types derived by transformers)
  smollm3_tiny         SmolLM3ForCausalLM, 4 layers, no_rope_layer_interval 2 (no_rope_layers [1, 0, 1, 0]:
                       layers 1 and 3 without RoPE), use_sliding_window with sliding_window 3 (layer_types
                       derived: the RoPE-less layers slide), attention and MLP biases, tied head
RMSNorm weights are drawn away from their all-ones init (1 + N(0, 0.2)) so their gradients are not trivial.
"""
import argparse
import os

import torch
from transformers import (MistralConfig, MistralForCausalLM, Qwen3Config, Qwen3ForCausalLM, SmolLM3Config,
                          SmolLM3ForCausalLM)

from make_golden import HERE, write_fixture


def with_random_norms(model_class):
    def make(config):
        model = model_class(config)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "norm" in name:
                    p.add_(0.2 * torch.randn_like(p))
        return model
    return make


def make_models():
    common = dict(hidden_size=32, intermediate_size=40, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  max_position_embeddings=64, rms_norm_eps=1e-6, initializer_range=0.2)
    mistral = MistralConfig(vocab_size=72, num_hidden_layers=2, rope_theta=10000.0, tie_word_embeddings=False,
                            sliding_window=3, **common)
    qwen3 = Qwen3Config(vocab_size=64, num_hidden_layers=3, rope_theta=10000.0, tie_word_embeddings=True,
                        attention_bias=False, use_sliding_window=True, sliding_window=4, max_window_layers=1,
                        **common)
    smollm3 = SmolLM3Config(vocab_size=68, num_hidden_layers=4, rope_theta=50000.0, tie_word_embeddings=True,
                            attention_bias=True, mlp_bias=True, no_rope_layer_interval=2, use_sliding_window=True,
                            sliding_window=3, bos_token_id=1, eos_token_id=2, pad_token_id=0, **common)
    assert qwen3.layer_types == ["full_attention", "sliding_attention", "sliding_attention"], qwen3.layer_types
    assert smollm3.no_rope_layers == [1, 0, 1, 0], smollm3.no_rope_layers
    assert smollm3.layer_types == ["full_attention", "sliding_attention"] * 2, smollm3.layer_types
    return {"mistral_tiny": (mistral, MistralForCausalLM), "qwen3_sliding_tiny": (qwen3, Qwen3ForCausalLM),
            "smollm3_tiny": (smollm3, SmolLM3ForCausalLM)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=HERE, help="folder for the fixtures (default: tests/golden)")
    out_root = ap.parse_args().out
    torch.manual_seed(2718)
    gen = torch.Generator().manual_seed(31)
    for name, (config, cls) in make_models().items():
        write_fixture(os.path.join(out_root, name), config, with_random_norms(cls), gen)


if __name__ == "__main__":
    main()
