#!/usr/bin/env python3
"""PyTorch + transformers peer of bench/gpu_bench.cpp: the same Qwen2.5-0.5B-shaped model and step.

    python3 bench/gpu_peer.py [--layers 24] [--seq_len 4096] [--rows 1] [--steps 8] [--warmup 2]
                              [--mode autocast|bf16|fp32|tf32] [--peak 989e12] [--out peer.md]

A step is what TRL's SFTTrainer does per optimizer step on one GPU: forward with labels (the shifted
next-token loss), backward, clip_grad_norm_(1.0), torch.optim.AdamW(fused=True), zero_grad.
Attention is "sdpa". Modes: autocast = fp32 master weights + torch.autocast(bfloat16) (TRL's bf16=True
on an fp32 checkpoint); bf16 = the whole model in bfloat16; fp32 and tf32 = full precision without/with
TF32 matmuls (the apples-to-apples peers of gpu_bench's fp32 Decoder). Rows are one causal sequence each
(sdpa has no document masking), so the peer does slightly more attention work than the packed rows of
gpu_bench. MFU uses the same PaLM formula (6 N + 12 L H Q T per token, N = all parameters with the tied
head counted once). Prints one markdown table row; "RESULT tokens_per_s=..." for scripts.
"""
import argparse
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--seq_len", type=int, default=4096)
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--mode", choices=["autocast", "bf16", "fp32", "tf32"], default="autocast")
    p.add_argument("--peak", type=float, default=989e12)
    p.add_argument("--out", default="")
    a = p.parse_args()

    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.backends.cuda.matmul.allow_tf32 = a.mode == "tf32"
    torch.backends.cudnn.allow_tf32 = a.mode == "tf32"
    config = Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=a.layers,
                         num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                         max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6,
                         tie_word_embeddings=True, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).cuda()
    if a.mode == "bf16":
        model = model.to(torch.bfloat16)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    ids = torch.randint(0, config.vocab_size, (a.rows, a.seq_len), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.mode == "autocast"):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / a.steps

    n_params = sum(t.numel() for t in model.parameters())  # tied head counted once, as flops.hpp
    head_dim = config.hidden_size // config.num_attention_heads
    flops_per_token = 6 * n_params + 12 * a.layers * config.num_attention_heads * head_dim * a.seq_len
    tokens_per_s = a.rows * a.seq_len / seconds
    mfu = flops_per_token * tokens_per_s / a.peak
    peak_gib = torch.cuda.max_memory_allocated() / 2**30
    row = (f"| torch {torch.__version__} + transformers, sdpa, fused AdamW, {a.mode} | {a.rows}x{a.seq_len} | "
           f"{seconds:.3f} | {tokens_per_s:.0f} | {100 * mfu:.1f}% | {peak_gib:.2f} | {loss.item():.4f} |")
    print("| peer | tokens/step | step s | tokens/s | MFU | peak allocated GiB | loss |")
    print("|---|---|---|---|---|---|---|")
    print(row)
    print(f"RESULT tokens_per_s={tokens_per_s:.1f} mfu={mfu:.4f} mode={a.mode}")
    if a.out:
        with open(a.out, "a") as f:
            f.write(row + "\n")


if __name__ == "__main__":
    main()
