#!/usr/bin/env python3
"""PyTorch + transformers peer of bench/gpu_bench.cpp: the same Qwen2.5-0.5B-shaped model, step and rows.

    python3 bench/gpu_peer.py [--batch batch.json] [--layers 24] [--seq_len 4096] [--rows 1] [--steps 8]
                              [--warmup 2] [--mode autocast|bf16|fp32|tf32] [--peak 989e12] [--device cuda]
                              [--tiny] [--self_check] [--json result.json] [--out peer.md]

A step is what TRL's SFTTrainer does per optimizer step on one GPU: forward, the next-token loss
(mean over the target tokens), backward, clip_grad_norm_(1.0), torch.optim.AdamW(fused=True),
zero_grad. Attention is "sdpa".

Rows: --batch reads the packed rows gpu_bench trains on (`gpu_bench --dump_batch FILE`: input_ids,
positions restarting at each document, targets = the next token within the document, -100 at each
document's last token), so both sides do the same work. The documents are kept apart by passing
position_ids, no attention_mask and use_cache=False: transformers then masks packed sequences
block-diagonally (its padding-free path, what TRL does with packing; with a cache it does not). --self_check verifies that on this transformers: the
packed forward's logits equal each document's own forward (fp32), else the peer would attend across
documents and the comparison would be unfair. Without --batch: one random causal row per sequence.

Modes: autocast = fp32 master weights + torch.autocast(bfloat16) (TRL's bf16=True on an fp32 checkpoint,
the peer of gpu_bench --bf16); bf16 = the whole model in bfloat16; fp32 and tf32 = full precision
without/with TF32 matmuls (peers of gpu_bench's fp32 Decoder). MFU: the count of
include/trlhpc/train/flops.hpp (6 N per token + 12 L H Q per causal (query, key) pair of each document,
N = all parameters with the tied head counted once). --tiny: hidden 64, 4 heads, 2 kv heads, intermediate 128 (the vocabulary stays,
since the batch's ids use it) for a CPU self-check. Prints a markdown row and "RESULT tokens_per_s=...".
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

IGNORE = -100


def load_batch(path, device):
    b = json.load(open(path))
    shape = (b["rows"], b["seq_len"])
    ids = torch.tensor(b["input_ids"], dtype=torch.long, device=device).view(shape)
    pos = torch.tensor(b["positions"], dtype=torch.long, device=device).view(shape)
    targets = torch.tensor(b["targets"], dtype=torch.long, device=device).view(shape)
    targets[targets == b["ignore_index"]] = IGNORE
    return ids, pos, targets


def random_batch(rows, seq_len, vocab, device):
    ids = torch.randint(0, vocab, (rows, seq_len), device=device)
    pos = torch.arange(seq_len, device=device).expand(rows, seq_len)
    targets = torch.cat([ids[:, 1:], torch.full((rows, 1), IGNORE, device=device)], dim=1)
    return ids, pos, targets


def build_model(a, layers):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    shape = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2) if a.tiny \
        else dict(hidden_size=896, intermediate_size=4864, num_attention_heads=14, num_key_value_heads=2)
    config = Qwen2Config(**shape, num_hidden_layers=layers, vocab_size=151936, max_position_embeddings=32768,
                         rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).to(a.device)
    if a.mode == "bf16":
        model = model.to(torch.bfloat16)
    return config, model


def loss_of(model, ids, pos, targets):
    logits = model(input_ids=ids, position_ids=pos, use_cache=False).logits
    n = (targets != IGNORE).sum()
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1), ignore_index=IGNORE,
                           reduction="sum") / n


def self_check(model, ids, pos):
    """The packed row's logits equal each document's own forward: the documents do not see each other."""
    with torch.no_grad():
        packed = model(input_ids=ids[:1], position_ids=pos[:1], use_cache=False).logits[0].float()
        starts = [t for t in range(ids.shape[1]) if pos[0, t] == 0] + [ids.shape[1]]
        worst = 0.0
        for s, e in zip(starts[:-1], starts[1:]):
            alone = model(input_ids=ids[:1, s:e], position_ids=pos[:1, s:e], use_cache=False).logits[0].float()
            worst = max(worst, (packed[s:e] - alone).abs().max().item())
    print(f"self-check: {len(starts) - 1} packed documents, worst |packed - alone| logit {worst:.3g}")
    if len(starts) < 3:
        raise SystemExit("self-check needs a row of at least 2 documents (gpu_bench --max_doc smaller than --seq_len)")
    if worst > 1e-4:
        raise SystemExit("self-check FAILED: transformers attends across the packed documents "
                         "(position_ids not turned into a block-diagonal mask)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", default="")
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--seq_len", type=int, default=4096)
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--mode", choices=["autocast", "bf16", "fp32", "tf32"], default="autocast")
    p.add_argument("--peak", type=float, default=989e12)
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--self_check", action="store_true")
    p.add_argument("--json", default="")
    p.add_argument("--out", default="")
    a = p.parse_args()
    cuda = a.device.startswith("cuda")

    torch.backends.cuda.matmul.allow_tf32 = a.mode == "tf32"
    torch.backends.cudnn.allow_tf32 = a.mode == "tf32"
    config, model = build_model(a, a.layers)
    ids, pos, targets = load_batch(a.batch, a.device) if a.batch else \
        random_batch(a.rows, a.seq_len, config.vocab_size, a.device)
    rows, seq_len = ids.shape
    if a.self_check:
        self_check(model, ids, pos)
    model.train()
    try:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    except (RuntimeError, ValueError):  # fused AdamW is CUDA-only on older torch: the CPU self-check only
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)

    def step():
        with torch.autocast(a.device.split(":")[0], dtype=torch.bfloat16, enabled=a.mode == "autocast"):
            loss = loss_of(model, ids, pos, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(a.warmup):
        step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    sync()
    seconds = (time.perf_counter() - start) / a.steps

    n_params = sum(t.numel() for t in model.parameters())  # tied head counted once, as flops.hpp
    head_dim = config.hidden_size // config.num_attention_heads
    # Causal pairs: the query at document position p attends p + 1 keys (flops.hpp, positions restart per document).
    pairs = float((pos.to(torch.float64) + 1).sum())
    step_flops = 6 * n_params * rows * seq_len + 12 * a.layers * config.num_attention_heads * head_dim * pairs
    tokens_per_s = rows * seq_len / seconds
    mfu = step_flops / seconds / a.peak
    peak_gib = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    if not torch.isfinite(loss):
        raise SystemExit(f"peer: non-finite loss {loss.item()}")
    row = (f"| torch {torch.__version__} + transformers, sdpa, AdamW, {a.mode}, {a.device} | {rows}x{seq_len} | "
           f"{seconds:.3f} | {tokens_per_s:.0f} | {100 * mfu:.1f}% | "
           f"{'-' if peak_gib is None else f'{peak_gib:.2f}'} | {loss.item():.4f} |")
    print("| peer | tokens/step | step s | tokens/s | MFU | peak allocated GiB | loss |")
    print("|---|---|---|---|---|---|---|")
    print(row)
    print(f"RESULT tokens_per_s={tokens_per_s:.1f} mfu={mfu:.4f} mode={a.mode}")
    if a.json:
        json.dump({"tokens_per_second": tokens_per_s, "mfu": mfu, "peak_memory_gib": peak_gib, "step_seconds": seconds,
                   "loss": loss.item(), "mode": a.mode, "torch": torch.__version__, "rows": rows,
                   "seq_len": seq_len, "layers": a.layers}, open(a.json, "w"))
    if a.out:
        with open(a.out, "a") as f:
            f.write(row + "\n")


if __name__ == "__main__":
    main()
