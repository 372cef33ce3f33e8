#!/usr/bin/env python3
"""trlhpc vs PyTorch + transformers: SFT step throughput on the CPU, same model, same batches.

    python3 bench/sft_cpu_bench.py [--trlhpc build/trlhpc] [--threads 2] [--steps 12]

Builds a ~21M-parameter Qwen2 config (hidden 512, 6 layers, 8 heads, 2 kv heads, intermediate 1408,
vocab 8192, tied), saves transformers' random init as a Hugging Face directory, and writes 48 rows of
512 random token ids as a pre-tokenized dataset. Then, on the same cores:
  - trlhpc sft --model_name_or_path <that dir> (no shuffling, batch 4, AdamW, clip 1.0)
  - PyTorch: the same model and rows in the same order, AdamW (foreach), clip 1.0, fp32, eager
    attention replaced by sdpa, torch.set_num_threads(threads).
Prints tokens/s (steady state: the first two steps are excluded), MFU against the measured GEMM peak,
peak RSS of each, the ratio, and both loss curves (they start from the same weights and see the same
data, so they must agree).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

SEQ, ROWS, BATCH = 512, 48, 4


def flops_per_token(cfg):
    n = sum(p.numel() for p in Qwen2ForCausalLM(cfg).parameters())  # tied: embedding counted once
    return 6 * n + 12 * cfg.num_hidden_layers * cfg.num_attention_heads * (cfg.hidden_size // cfg.num_attention_heads) * SEQ


def gemm_peak(threads):
    torch.set_num_threads(threads)
    a = torch.randn(1024, 1024)
    a @ a
    t = time.perf_counter()
    for _ in range(5):
        a @ a
    return 2 * 1024**3 * 5 / (time.perf_counter() - t)


def run_torch(model_dir, rows, steps, threads):
    torch.set_num_threads(threads)
    model = Qwen2ForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa", dtype=torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    losses, times = [], []
    for step in range(steps):
        ids = torch.tensor(rows[(step * BATCH) % ROWS:(step * BATCH) % ROWS + BATCH])
        t = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
        losses.append(float(loss.detach()))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return losses, times, rss


def run_trlhpc(binary, model_dir, data, steps, threads, out):
    cmd = ["/usr/bin/time", "-v", binary, "sft", "--model_name_or_path", model_dir, "--dataset_name", data,
           "--max_length", str(SEQ), "--per_device_train_batch_size", str(BATCH), "--max_steps", str(steps),
           "--learning_rate", "1e-3", "--lr_scheduler_type", "constant", "--logging_steps", "1",
           "--shuffle_dataset", "false", "--output_dir", out, "--device", "cpu"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("trlhpc failed:\n" + p.stdout + p.stderr)
    rss = next(int(l.split()[-1]) for l in p.stderr.splitlines() if "Maximum resident" in l) / 1024
    metrics = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
    return [m["loss"] for m in metrics], [m["tokens_per_second"] for m in metrics], rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trlhpc", default="build/trlhpc")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=8192, hidden_size=512, intermediate_size=1408, num_hidden_layers=6,
                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=SEQ,
                      tie_word_embeddings=True, use_sliding_window=False)
    work = tempfile.mkdtemp(prefix="trlhpc-bench-")
    model_dir = os.path.join(work, "model")
    Qwen2ForCausalLM(cfg).save_pretrained(model_dir)
    g = torch.Generator().manual_seed(1)
    rows = torch.randint(0, cfg.vocab_size, (ROWS, SEQ), generator=g).tolist()
    data = os.path.join(work, "train.jsonl")
    with open(data, "w") as f:
        for r in rows:
            f.write(json.dumps({"input_ids": r}) + "\n")

    peak = gemm_peak(args.threads)
    fpt = flops_per_token(cfg)
    t_losses, t_tps, t_rss = run_trlhpc(args.trlhpc, model_dir, data, args.steps, args.threads, os.path.join(work, "out"))
    p_losses, p_times, p_rss = run_torch(model_dir, rows, args.steps, args.threads)
    tokens = BATCH * SEQ
    ours = sum(t_tps[2:]) / len(t_tps[2:])
    theirs = tokens / (sum(p_times[2:]) / len(p_times[2:]))
    print(f"model: {sum(p.numel() for p in Qwen2ForCausalLM(cfg).parameters())/1e6:.1f}M params, seq {SEQ}, batch {BATCH}, "
          f"{args.threads} threads, GEMM peak {peak/1e9:.1f} GFLOP/s")
    print(f"{'':10s} {'tokens/s':>10s} {'MFU':>7s} {'peak RSS':>10s}")
    print(f"{'trlhpc':10s} {ours:10.0f} {100*ours*fpt/peak:6.1f}% {t_rss:8.0f} MB")
    print(f"{'pytorch':10s} {theirs:10.0f} {100*theirs*fpt/peak:6.1f}% {p_rss:8.0f} MB")
    print(f"ratio trlhpc/pytorch: {ours/theirs:.2f}x")
    print("loss trlhpc :", " ".join(f"{x:.4f}" for x in t_losses))
    print("loss pytorch:", " ".join(f"{x:.4f}" for x in p_losses))
    worst = max(abs(a - b) / b for a, b in zip(t_losses, p_losses))
    print(f"max relative loss difference: {worst:.2e}")


if __name__ == "__main__":
    main()
