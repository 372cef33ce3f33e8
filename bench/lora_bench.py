#!/usr/bin/env python3
"""LoRA vs full fine-tuning under ZeRO-3 on the Qwen2.5-0.5B shape, on the CPU (issue 28's bench).

    python3 bench/lora_bench.py [--trlhpc build/trlhpc] [--np 2] [--steps 6] [--seq 512] [--no-peer]

Writes a --model_config JSON with the Qwen2.5-0.5B shape (bench/qwen25_shape.hpp: hidden 896, 24 layers,
14 heads / 2 kv heads, intermediate 4864, vocab 151936, tied; trlhpc's seeded random init) and
np * steps rows of `seq` random token ids as a pre-tokenized dataset (no tokenizer needed). Then, on
`np` ranks of one thread each (mpirun --oversubscribe, OMP_NUM_THREADS=1), --sharding zero3, batch 1
per rank, no shuffling:
  (a) full fine-tuning,
  (b) LoRA r 16, alpha 32, dropout 0, all-linear (the seven projections of every layer).
Each rank runs under /usr/bin/time -v, so the peak RSS of every rank is measured by the kernel (trlhpc's
own "peak resident memory per rank" line reports the largest rank and is printed as well).
Prints per run: tokens/s of the whole job (steady state: the tokens of the steps after the first `--warmup`
over their summed time; also the fastest steady step),
the start line's per-rank plan (parameters, gradients, optimizer, gathered unit, activations, loss chunk,
floor), the peak RSS of each rank, and the LoRA/full ratios.

Peer (unless --no-peer): PyTorch + transformers + peft, the same shape (transformers' random init), LoRA
r 16 / alpha 32 / dropout 0 / all-linear, AdamW on the adapters, clip 1.0, fp32, sdpa, in one process with
`np` threads (the same cores), batch np (the global batch of the trlhpc runs) over the same rows in the
same order. Its tokens/s and peak RSS (getrusage) are printed next to trlhpc's LoRA run. torch here needs
the stub libraries of this machine: LD_LIBRARY_PATH=/opt/torchstubs:... LD_PRELOAD=/opt/torchstubs/libmissing.so
(set them in the environment before running; the peer is a subprocess of this script).
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

QWEN25_05B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
              "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
              "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
              "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": True,
              "initializer_range": 0.02, "use_sliding_window": False}
LORA_FLAGS = ["--use_peft", "--lora_r", "16", "--lora_alpha", "32", "--lora_dropout", "0",
              "--lora_target_modules", "all-linear"]


def run_trlhpc(args, work, name, extra):
    out = os.path.join(work, name)
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(args.np), "/usr/bin/time", "-v",
           args.trlhpc, "sft", "--model_config", os.path.join(work, "config.json"),
           "--dataset_name", os.path.join(work, "train.jsonl"), "--max_length", str(args.seq),
           "--per_device_train_batch_size", "1", "--max_steps", str(args.steps), "--learning_rate", "1e-4",
           "--lr_scheduler_type", "constant", "--logging_steps", "1", "--shuffle_dataset", "false",
           "--sharding", "zero3", "--output_dir", out, "--device", "cpu"] + extra
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("LD_PRELOAD", None)  # the torch stubs are for the peer only
    if os.getuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    text = p.stdout + p.stderr
    if p.returncode != 0:
        sys.exit(f"trlhpc {name} failed (exit {p.returncode}):\n{text[-4000:]}")
    start = next(l for l in text.splitlines() if "per rank: parameters" in l)
    saved = next(l for l in text.splitlines() if "peak resident memory per rank" in l)
    rss = [int(l.split()[-1]) / 1024 for l in text.splitlines() if "Maximum resident set size" in l]
    metrics = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if '"loss"' in l]
    # Each logged step (logging_steps 1) holds its global tokens and tokens/s, so its wall time; the steady
    # state is the steady steps' tokens over their summed time (not a mean of rates, which overweights
    # the fast steps), and the fastest step shows what the cores give with the least interference.
    tokens = [b["num_tokens"] - a for a, b in zip([0] + [m["num_tokens"] for m in metrics], metrics)]
    seconds = [t / m["tokens_per_second"] for t, m in zip(tokens, metrics)]
    steady = metrics[args.warmup:]
    tps = sum(tokens[args.warmup:]) / sum(seconds[args.warmup:])
    plan = {k: float(v) for k, v in re.findall(
        r"(parameters|gradients|optimizer|largest gathered unit \+ gradient|activations|loss chunk|floor) "
        r"([0-9.]+) MiB", start)}
    return {"name": name, "tps": tps, "rss": rss, "plan": plan, "start": start.strip(), "saved": saved.strip(),
            "losses": [m["loss"] for m in metrics], "seconds": seconds,
            "best": max(m["tokens_per_second"] for m in steady), "mfu": sum(m["mfu"] for m in steady) / len(steady),
            "peak_memory_mib": max(m.get("peak_memory_mib", 0) for m in metrics)}


PEER = r'''
import json, resource, sys, time
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM
from peft import LoraConfig, get_peft_model
cfg_path, data_path, steps, batch, threads, warmup = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
torch.set_num_threads(threads)
torch.manual_seed(0)
cfg = Qwen2Config(**{k: v for k, v in json.load(open(cfg_path)).items() if k != "architectures"})
cfg._attn_implementation = "sdpa"
model = Qwen2ForCausalLM(cfg)
model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear",
                                         task_type="CAUSAL_LM"))
trainable = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.0)
rows = [json.loads(l)["input_ids"] for l in open(data_path)]
model.train()
times, losses = [], []
for step in range(steps):
    ids = torch.tensor(rows[step * batch:(step + 1) * batch])
    t = time.perf_counter()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainable, 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    times.append(time.perf_counter() - t)
    losses.append(float(loss.detach()))
steady = times[warmup:]
print(json.dumps({"tps": batch * ids.shape[1] / (sum(steady) / len(steady)), "times": times, "losses": losses,
                  "trainable": sum(p.numel() for p in trainable),
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


def run_peer(args, work):
    p = subprocess.run([sys.executable, "-c", PEER, os.path.join(work, "config.json"),
                        os.path.join(work, "train.jsonl"), str(args.steps), str(args.np), str(args.np),
                        str(args.warmup)], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"peer failed (exit {p.returncode}); left out:\n{p.stderr[-2000:]}")
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trlhpc", default="build/trlhpc")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2, help="logged steps left out of the steady state")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--no-peer", dest="peer", action="store_false")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (each run saves a ~2 GB model)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="trlhpc-lora-bench-")
    json.dump(QWEN25_05B, open(os.path.join(work, "config.json"), "w"), indent=1)
    rng = random.Random(1)
    with open(os.path.join(work, "train.jsonl"), "w") as f:
        for _ in range(args.np * args.steps):
            f.write(json.dumps({"input_ids": [rng.randrange(QWEN25_05B["vocab_size"]) for _ in range(args.seq)]}) + "\n")

    runs = [run_trlhpc(args, work, "full", []), run_trlhpc(args, work, "lora", LORA_FLAGS)]
    peer = run_peer(args, work) if args.peer else None
    if not args.keep:
        shutil.rmtree(work)
    print(f"Qwen2.5-0.5B shape, seq {args.seq}, batch 1 per rank, zero3 x {args.np}, 1 thread per rank, "
          f"{args.steps} steps (steady state: steps {args.warmup + 1}..{args.steps})")
    for r in runs:
        print(f"[{r['name']}] {r['start']}")
        print(f"[{r['name']}] {r['saved']}")
    keys = ["parameters", "gradients", "optimizer", "largest gathered unit + gradient", "activations",
            "loss chunk", "floor"]
    print(f"{'':10s} {'tokens/s':>9s} {'best':>6s} {'MFU(6N)':>8s} " + " ".join(f"{k.split()[0][:10]:>10s}" for k in keys)
          + "   peak RSS per rank (MiB)")
    for r in runs:
        print(f"{r['name']:10s} {r['tps']:9.1f} {r['best']:6.1f} {100 * r['mfu']:7.1f}% "
              + " ".join(f"{r['plan'].get(k, float('nan')):10.0f}" for k in keys)
              + "   " + ", ".join(f"{x:.0f}" for x in r["rss"]))
    full, lora = runs
    print(f"{'lora/full':10s} {lora['tps'] / full['tps']:9.2f} {lora['best'] / full['best']:6.2f} {'':8s} "
          + " ".join(f"{lora['plan'].get(k, 0) / full['plan'][k] if full['plan'].get(k) else float('nan'):10.2f}"
                     for k in keys)
          + f"   {max(lora['rss']) / max(full['rss']):.2f} (largest rank)")
    if peer:
        print(f"peer pytorch+peft LoRA (1 process, {args.np} threads, batch {args.np}): {peer['tps']:.1f} tokens/s, "
              f"peak RSS {peer['rss']:.0f} MiB, {peer['trainable']} trainable; "
              f"trlhpc LoRA / peer tokens/s {lora['tps'] / peer['tps']:.2f}")
        print("peer step seconds:", " ".join(f"{t:.2f}" for t in peer["times"]))
    for r in runs:
        print(f"step seconds {r['name']}:", " ".join(f"{t:.2f}" for t in r["seconds"]))
    for r in runs:
        print(f"loss {r['name']}:", " ".join(f"{x:.4f}" for x in r["losses"]))
    if peer:
        print("loss peer:", " ".join(f"{x:.4f}" for x in peer["losses"]))


if __name__ == "__main__":
    main()
