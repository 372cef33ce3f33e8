#!/usr/bin/env python3
"""trlhpc vs PyTorch + transformers: SFT step throughput on the CPU, same model, same batches.

    python3 bench/sft_cpu_bench.py [--trlhpc build/trlhpc] [--threads 2] [--steps 12]

Builds a ~21M-parameter Qwen2 config (hidden 512, 6 layers, 8 heads, 2 kv heads, intermediate 1408,
vocab 8192, tied), saves transformers' random init as a Hugging Face directory, and writes 48 rows of
512 random token ids as a pre-tokenized dataset. Then, on the same cores:
  - trlhpc sft --model_name_or_path <that dir> (no shuffling, batch 4, AdamW, clip 1.0)
  - PyTorch: the same model and rows in the same order, AdamW (foreach), clip 1.0, fp32, eager
    attention replaced by sdpa, torch.set_num_threads(threads).
Prints tokens/s (steady state: the first two steps are excluded), MFU against the best sgemm rate either
library measured on these cores (PyTorch's 2048^3 matmul; trlhpc's own measurement, derived from the MFU
it logs), peak RSS of each, the ratio, and both loss curves (they start from the same weights and see
the same data, so they must agree).

OPENBLAS_CORETYPE: when the environment pins an OpenBLAS core (some machines set e.g. Haswell
machine-wide, which leaves AVX-512 unused), trlhpc runs twice: as the environment says, and with the
variable removed so OpenBLAS picks its kernels for the CPU. Both rows are printed; PyTorch (MKL) ignores
the variable.
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
    # Causal attention over rows of one SEQ-token document, as trlhpc counts it (train/flops.hpp): 6 L H Q (T + 1).
    return 6 * n + 6 * cfg.num_hidden_layers * cfg.num_attention_heads * (cfg.hidden_size // cfg.num_attention_heads) * (SEQ + 1)


def gemm_peak(threads):
    torch.set_num_threads(threads)
    a = torch.randn(2048, 2048)
    a @ a
    best = float("inf")
    for _ in range(4):
        t = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - t)
    return 2 * 2048**3 / best


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


def run_trlhpc(binary, model_dir, data, steps, threads, out, blas_env):
    cmd = ["/usr/bin/time", "-v", binary, "sft", "--model_name_or_path", model_dir, "--dataset_name", data,
           "--max_length", str(SEQ), "--per_device_train_batch_size", str(BATCH), "--max_steps", str(steps),
           "--learning_rate", "1e-3", "--lr_scheduler_type", "constant", "--logging_steps", "1",
           "--shuffle_dataset", "false", "--output_dir", out, "--device", "cpu"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if blas_env is None:
        env.pop("OPENBLAS_CORETYPE", None)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("trlhpc failed:\n" + p.stdout + p.stderr)
    rss = next(int(l.split()[-1]) for l in p.stderr.splitlines() if "Maximum resident" in l) / 1024
    metrics = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
    steady = metrics[2:]
    # trlhpc's mfu_of_gemm_rate uses the same FLOPs per token and its own measured sgemm rate: peak / flops_per_token.
    peak = sum(m["tokens_per_second"] / m["mfu_of_gemm_rate"] for m in steady) / len(steady)
    return [m["loss"] for m in metrics], [m["tokens_per_second"] for m in metrics], rss, peak


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

    torch_peak = gemm_peak(args.threads)
    fpt = flops_per_token(cfg)
    pinned = os.environ.get("OPENBLAS_CORETYPE")
    runs = [(f"trlhpc (OPENBLAS_CORETYPE={pinned})", pinned), ("trlhpc (OpenBLAS picks)", None)] if pinned else [("trlhpc", None)]
    ours = []
    for i, (name, blas_env) in enumerate(runs):
        losses, tps, rss, peak = run_trlhpc(args.trlhpc, model_dir, data, args.steps, args.threads,
                                            os.path.join(work, f"out{i}"), blas_env)
        ours.append((name, losses, sum(tps[2:]) / len(tps[2:]) * fpt, rss, peak * fpt))
    p_losses, p_times, p_rss = run_torch(model_dir, rows, args.steps, args.threads)
    tokens = BATCH * SEQ
    theirs = tokens / (sum(p_times[2:]) / len(p_times[2:]))
    peak = max([torch_peak] + [o[4] for o in ours])
    print(f"model: {sum(p.numel() for p in Qwen2ForCausalLM(cfg).parameters())/1e6:.1f}M params, seq {SEQ}, batch {BATCH}, "
          f"{args.threads} threads; sgemm peak {peak/1e9:.1f} GFLOP/s (PyTorch {torch_peak/1e9:.1f}, "
          + ", ".join(f"{o[0]} {o[4]/1e9:.1f}" for o in ours) + ")")
    print(f"{'':36s} {'tokens/s':>10s} {'MFU':>7s} {'peak RSS':>10s} {'vs pytorch':>11s}")
    for name, _, flops, rss, _ in ours:
        print(f"{name:36s} {flops/fpt:10.0f} {100*flops/peak:6.1f}% {rss:8.0f} MB {flops/fpt/theirs:10.2f}x")
    print(f"{'pytorch':36s} {theirs:10.0f} {100*theirs*fpt/peak:6.1f}% {p_rss:8.0f} MB")
    for name, losses, _, _, _ in ours:
        print(f"loss {name}:", " ".join(f"{x:.4f}" for x in losses))
    print("loss pytorch:", " ".join(f"{x:.4f}" for x in p_losses))
    worst = max(abs(a - b) / b for o in ours for a, b in zip(o[1], p_losses))
    print(f"max relative loss difference: {worst:.2e}")

if __name__ == "__main__":
    main()
