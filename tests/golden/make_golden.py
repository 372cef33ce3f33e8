#!/usr/bin/env python3
"""Golden fixtures from PyTorch + transformers for trlhpc's model/trainer tests.

Run by hand where torch and transformers are installed (pip install torch transformers safetensors):
    python3 tests/golden/make_golden.py
It writes, for each tiny random model below, tests/golden/<name>/:
    model/            a Hugging Face directory (config.json + fp32 model.safetensors)
    expected.safetensors   logits (B,T,V), grad.<param name> for every parameter
    expected.json     the batch (input_ids, targets, positions, doc_ids), loss, and 5 AdamW steps
The reference runs in float64 so the fixtures are an exact target for trlhpc's fp32 CPU backend.

Batch semantics (trlhpc's Batch): row 0 is a packed row holding two documents (positions restart,
doc ids differ); row 1 is one document followed by right padding. transformers has no document mask in
eager attention, so the reference runs every document as its own sequence and sums the token losses;
the loss is the mean over all target tokens, as CONTRACT.md defines it.
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
IGNORE = -100


def make_models():
    qwen = Qwen2Config(vocab_size=96, hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                       rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                       initializer_range=0.2, use_sliding_window=False)
    llama = LlamaConfig(vocab_size=80, hidden_size=32, intermediate_size=44, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=64,
                        rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
                        attention_bias=True, mlp_bias=True, initializer_range=0.2,
                        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 16})
    return {"qwen2_tiny": (qwen, Qwen2ForCausalLM), "llama_tiny": (llama, LlamaForCausalLM)}


def make_batch(vocab, gen):
    """Two rows of T=12: row 0 = docs of 7 and 5 tokens, row 1 = one doc of 9 tokens + 3 pads."""
    T = 12
    docs = [[(0, 7), (7, 12)], [(0, 9)]]
    ids = torch.randint(0, vocab, (2, T), generator=gen)
    ids[1, 9:] = 0
    # Loss mask per token (1 = trained as a target): mask the first 2 tokens of doc 0 (a "prompt").
    mask = torch.ones(2, T, dtype=torch.long)
    mask[0, 0:2] = 0
    mask[1, 9:] = 0
    targets = torch.full((2, T), IGNORE, dtype=torch.long)
    positions = torch.zeros(2, T, dtype=torch.long)
    doc_ids = torch.full((2, T), -1, dtype=torch.long)
    for r, row in enumerate(docs):
        for d, (a, b) in enumerate(row):
            positions[r, a:b] = torch.arange(b - a)
            doc_ids[r, a:b] = d
            for t in range(a, b - 1):
                if mask[r, t + 1]:
                    targets[r, t] = ids[r, t + 1]
    pad_positions = positions.clone()
    pad_positions[1, 9:] = torch.arange(9, T)
    return ids, targets, pad_positions, doc_ids, docs


def loss_and_logits(model, ids, targets, docs):
    """Sum of token CE over every document run separately, logits (B,T,V) assembled per doc."""
    B, T = ids.shape
    logits = torch.zeros(B, T, model.config.vocab_size, dtype=torch.float64)
    total = torch.zeros((), dtype=torch.float64)
    for r, row in enumerate(docs):
        for a, b in row:
            out = model(input_ids=ids[r:r + 1, a:b]).logits[0]
            logits[r, a:b] = out.detach()
            tgt = targets[r, a:b]
            keep = tgt != IGNORE
            if keep.any():
                total = total + torch.nn.functional.cross_entropy(out[keep], tgt[keep], reduction="sum")
    return total, logits


def decay_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or "norm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def write_fixture(out_dir, config, make_model, gen):
    """One model's fixture folder: model/, expected.safetensors, expected.json (module docstring).
    make_model(config) builds the freshly initialised model (a transformers class)."""
    model = make_model(config).eval()
    model.config.torch_dtype = torch.float32
    model.save_pretrained(os.path.join(out_dir, "model"), safe_serialization=True)
    model = model.double()
    ids, targets, positions, doc_ids, docs = make_batch(config.vocab_size, gen)
    n_targets = int((targets != IGNORE).sum())

    loss_sum, logits = loss_and_logits(model, ids, targets, docs)
    (loss_sum / n_targets).backward()
    tensors = {"logits": logits.float().contiguous()}
    for pname, p in model.named_parameters():
        tensors["grad." + pname] = p.grad.float().contiguous()
    save_file(tensors, os.path.join(out_dir, "expected.safetensors"))

    # 5 optimizer steps on the same batch: AdamW (no decay on biases/norms), clip 1.0, lr 1e-2.
    model.zero_grad()
    opt = torch.optim.AdamW(decay_groups(model, 0.1), lr=1e-2, betas=(0.9, 0.999), eps=1e-8)
    losses, norms = [], []
    for _ in range(5):
        opt.zero_grad()
        loss_sum, _ = loss_and_logits(model, ids, targets, docs)
        loss = loss_sum / n_targets
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)))
        losses.append(float(loss.detach()))
        opt.step()

    expected = {
        "rows": 2, "seq_len": ids.shape[1],
        "input_ids": ids.flatten().tolist(), "targets": targets.flatten().tolist(),
        "positions": positions.flatten().tolist(), "doc_ids": doc_ids.flatten().tolist(),
        "target_tokens": n_targets,
        "train": {"lr": 1e-2, "weight_decay": 0.1, "max_grad_norm": 1.0, "losses": losses, "grad_norms": norms},
    }
    expected["loss"] = losses[0]  # loss of the initial weights = the first step's loss
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(os.path.basename(out_dir), "loss", losses[0], "->", losses[-1], "targets", n_targets)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=HERE, help="folder for the fixtures (default: tests/golden)")
    out_root = ap.parse_args().out
    torch.manual_seed(1234)
    gen = torch.Generator().manual_seed(99)
    for name, (config, cls) in make_models().items():
        write_fixture(os.path.join(out_root, name), config, cls, gen)

if __name__ == "__main__":
    main()
