#!/usr/bin/env python3
"""trlhpc vs the fastest PyTorch training loop we can write, on the CPU, same model, same batches.

    python3 bench/cpu_peer_bench.py [--trlhpc build/trlhpc] [--threads 2] [--steps 12]
                                    [--shapes 384,512,896] [--no-compile] [--openblas]
                                    [--also NAME=PATH ...]   (more trlhpc binaries, e.g. older commits)
                                    [--bf16]   (trlhpc --bf16 against PyTorch under torch.autocast bf16)

For each shape (Qwen2, fp32, tied embeddings, vocab 8192, 4 rows x 512 tokens per step):
  384: hidden 384, 6 layers, 6 heads / 2 kv heads, intermediate 1024   (issue 17's measurement)
  512: hidden 512, 6 layers, 8 heads / 2 kv heads, intermediate 1408   (bench/sft_cpu_bench.py's)
  896: hidden 896, 4 layers, 14 heads / 2 kv heads, intermediate 4864  (Qwen2.5-0.5B's layer, 4 of them)
it saves transformers' random initialisation as a Hugging Face directory and 48 rows of 512 random token
ids as a pre-tokenized dataset, then trains on them, in the same order, with:
  - trlhpc sft (no shuffling, AdamW, clip 1.0, constant lr 1e-3, weight decay 0);
  - "eager": a plain PyTorch Qwen2 written out here (no transformers overhead: fused q/k/v-free modules,
    F.scaled_dot_product_attention with GQA, RoPE with cached cos/sin), AdamW fused=True on the CPU
    (foreach when fused is refused), clip_grad_norm_ (foreach);
  - "compile": the same module under torch.compile (inductor, default mode); its first steps compile and
    are excluded like every run's first two steps.
Prints per shape: tokens/s (steps 3..N), MFU against the best sgemm rate measured on these cores (PyTorch's
2048^3 matmul and trlhpc's own measurement, which it logs), peak RSS of each run, trlhpc's ratio to each
peer and to the faster one, and the largest relative loss difference to the eager curve (same weights,
same data: the curves must agree to float rounding).

trlhpc runs with its default GEMM (its own AVX-512 kernel on CPUs that have it) and, with --openblas, also
with --cpu_gemm openblas: as the environment sets OPENBLAS_CORETYPE (this VM pins Haswell
machine-wide, which leaves AVX-512 unused) and, when it is set, with the variable removed. PyTorch
ignores the variable. Each run is its own subprocess so that peak RSS is its own.

--bf16: trlhpc runs with --bf16 and each PyTorch loop computes its forward (and so its backward) under
torch.autocast("cpu", dtype=torch.bfloat16) with fp32 parameters and optimizer, which is what TRL's
`bf16=True, use_cpu=True` sets up through accelerate. MFU is then against the best bf16 GEMM rate
measured in the run (PyTorch's 2048^3 bf16 matmul, and trlhpc's start-up measurement of its bf16 GEMM).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SEQ, ROWS, BATCH, VOCAB = 512, 48, 4, 8192
SHAPES = {
    384: dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, num_key_value_heads=2, intermediate_size=1024),
    512: dict(hidden_size=512, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=2, intermediate_size=1408),
    896: dict(hidden_size=896, num_hidden_layers=4, num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864),
}

PEER = r'''
import json, math, resource, sys, time
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

model_dir, data, steps, threads, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
bf16 = len(sys.argv) > 6 and sys.argv[6] == "bf16"
torch.set_num_threads(threads)
cfg = json.load(open(model_dir + "/config.json"))
C, L, NH, KVH = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
HS, eps, theta = C // NH, cfg["rms_norm_eps"], cfg.get("rope_theta", cfg.get("rope_parameters", {}).get("rope_theta", 10000.0))
state = load_file(model_dir + "/model.safetensors")


class Qwen2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.p = torch.nn.ParameterDict({k.replace(".", "_"): torch.nn.Parameter(v.float()) for k, v in state.items()
                                         if k != "lm_head.weight"})
        inv = 1.0 / theta ** (torch.arange(0, HS, 2, dtype=torch.float32) / HS)
        ang = torch.arange(4096, dtype=torch.float32)[:, None] * inv[None, :]
        ang = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def w(self, name):
        return self.p[name.replace(".", "_")]

    def norm(self, x, name):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.w(name)

    def rope(self, x, cos, sin):
        x1, x2 = x[..., : HS // 2], x[..., HS // 2:]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def forward(self, ids):
        B, T = ids.shape
        cos, sin = self.cos[:T], self.sin[:T]
        x = F.embedding(ids, self.w("model.embed_tokens.weight"))
        for i in range(L):
            p = f"model.layers.{i}."
            h = self.norm(x, p + "input_layernorm.weight")
            q = F.linear(h, self.w(p + "self_attn.q_proj.weight"), self.w(p + "self_attn.q_proj.bias")).view(B, T, NH, HS).transpose(1, 2)
            k = F.linear(h, self.w(p + "self_attn.k_proj.weight"), self.w(p + "self_attn.k_proj.bias")).view(B, T, KVH, HS).transpose(1, 2)
            v = F.linear(h, self.w(p + "self_attn.v_proj.weight"), self.w(p + "self_attn.v_proj.bias")).view(B, T, KVH, HS).transpose(1, 2)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = x + F.linear(a.transpose(1, 2).reshape(B, T, C), self.w(p + "self_attn.o_proj.weight"))
            h = self.norm(x, p + "post_attention_layernorm.weight")
            g = F.linear(h, self.w(p + "mlp.gate_proj.weight"))
            u = F.linear(h, self.w(p + "mlp.up_proj.weight"))
            x = x + F.linear(F.silu(g) * u, self.w(p + "mlp.down_proj.weight"))
        x = self.norm(x, "model.norm.weight")
        logits = F.linear(x, self.w("model.embed_tokens.weight"))
        # Causal LM loss: position t predicts token t+1 (as transformers and trlhpc).
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


model = Qwen2()
model.train()
params = list(model.parameters())
try:
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0, fused=True)
    opt_kind = "fused"
except (RuntimeError, TypeError):
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0, foreach=True)
    opt_kind = "foreach"
fwd = torch.compile(model) if mode == "compile" else model
rows = [json.loads(l)["input_ids"] for l in open(data)]
losses, times = [], []
for step in range(steps):
    s = (step * 4) % len(rows)
    ids = torch.tensor(rows[s:s + 4])
    t = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = fwd(ids)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
    opt.step()
    opt.zero_grad(set_to_none=True)
    times.append(time.perf_counter() - t)
    losses.append(float(loss.detach()))
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(dict(losses=losses, times=times, rss=rss, opt=opt_kind)))
'''

GEMM_PEAK = r'''
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
dtype = torch.bfloat16 if len(sys.argv) > 2 and sys.argv[2] == "bf16" else torch.float32
a = torch.randn(2048, 2048, dtype=dtype); a @ a
best = min((lambda t: (a @ a, time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(5))
print(2 * 2048**3 / best)
'''


def flops_per_token(shape):
    C, L, NH = shape["hidden_size"], shape["num_hidden_layers"], shape["num_attention_heads"]
    KVH, Fi, HS = shape["num_key_value_heads"], shape["intermediate_size"], C // NH
    layer = C * NH * HS + NH * HS + 2 * (C * KVH * HS + KVH * HS) + NH * HS * C + 3 * C * Fi + 2 * C
    n = VOCAB * C + L * layer + C  # tied: the embedding counted once
    return 6 * n + 6 * L * NH * HS * (SEQ + 1)  # causal rows of one SEQ-token document (train/flops.hpp)


def run_peer(model_dir, data, steps, threads, mode, bf16):
    p = subprocess.run([sys.executable, "-c", PEER, model_dir, data, str(steps), str(threads), mode] + (["bf16"] if bf16 else []),
                       capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    if p.returncode != 0:
        sys.exit(f"pytorch {mode} failed:\n{p.stderr[-4000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    return r["losses"], BATCH * SEQ / (sum(r["times"][2:]) / len(r["times"][2:])), r["rss"], r["opt"]


def run_trlhpc(binary, model_dir, data, steps, threads, out, env_change, extra):
    cmd = ["/usr/bin/time", "-v", binary, "sft", "--model_name_or_path", model_dir, "--dataset_name", data,
           "--max_length", str(SEQ), "--per_device_train_batch_size", str(BATCH), "--max_steps", str(steps),
           "--learning_rate", "1e-3", "--lr_scheduler_type", "constant", "--logging_steps", "1",
           "--weight_decay", "0", "--shuffle_dataset", "false", "--output_dir", out, "--device", "cpu",
           "--save_steps", "0"] + extra
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    for k, v in env_change.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("trlhpc failed:\n" + p.stdout[-3000:] + p.stderr[-3000:])
    rss = next(int(l.split()[-1]) for l in p.stderr.splitlines() if "Maximum resident" in l) / 1024
    metrics = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if '"loss"' in l]
    steady = metrics[2:]
    tps = sum(m["tokens_per_second"] for m in steady) / len(steady)
    own_peak = sum(m["tokens_per_second"] / m["mfu_of_gemm_rate"] for m in steady) / len(steady)  # = sgemm peak / FLOPs per token
    return [m["loss"] for m in metrics], tps, rss, own_peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trlhpc", default="build/trlhpc")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--shapes", default="384,512,896")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--openblas", action="store_true", help="also run trlhpc with --cpu_gemm openblas")
    ap.add_argument("--trlhpc-arg", action="append", default=[], help="extra argument for trlhpc sft")
    ap.add_argument("--bf16", action="store_true", help="trlhpc --bf16 against PyTorch under bf16 autocast")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=PATH",
                    help="another trlhpc binary to run in the same comparison (before/after a change)")
    args = ap.parse_args()
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch_peak = float(subprocess.run([sys.executable, "-c", GEMM_PEAK, str(args.threads)] + (["bf16"] if args.bf16 else []),
                                      capture_output=True, text=True, check=True).stdout)
    if args.bf16:
        args.trlhpc_arg = args.trlhpc_arg + ["--bf16"]
    pinned = os.environ.get("OPENBLAS_CORETYPE")
    # (name, environment changes, binary, extra trlhpc arguments)
    variants = [("trlhpc", {}, args.trlhpc, [])]
    openblas = ["--cpu_gemm", "openblas"]
    if args.openblas:
        variants.append((f"trlhpc, OpenBLAS GEMM ({pinned or 'its own core'})", {}, args.trlhpc, openblas))
        if pinned:
            variants.append(("trlhpc, OpenBLAS GEMM (own core)", {"OPENBLAS_CORETYPE": None}, args.trlhpc, openblas))
    for entry in args.also:
        name, _, path = entry.partition("=")
        variants.append((name, {}, path, []))
    load = os.getloadavg()[0]
    print(f"torch {torch.__version__}, {args.threads} threads, {args.steps} steps (first 2 excluded), "
          f"load average {load:.2f}, PyTorch {'bf16' if args.bf16 else 'fp32'} GEMM 2048^3 {torch_peak / 1e9:.0f} GFLOP/s")
    import platform
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    flags = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "")
    print(f"CPU: {cpu}; amx_bf16: {'amx_bf16' in flags}, avx512_bf16: {'avx512_bf16' in flags}")
    for key in [int(s) for s in args.shapes.split(",")]:
        shape = SHAPES[key]
        torch.manual_seed(0)
        cfg = Qwen2Config(vocab_size=VOCAB, max_position_embeddings=SEQ, tie_word_embeddings=True,
                          use_sliding_window=False, **shape)
        work = tempfile.mkdtemp(prefix="trlhpc-peer-")
        model_dir = os.path.join(work, "model")
        Qwen2ForCausalLM(cfg).save_pretrained(model_dir)
        g = torch.Generator().manual_seed(1)
        rows = torch.randint(0, VOCAB, (ROWS, SEQ), generator=g).tolist()
        data = os.path.join(work, "train.jsonl")
        with open(data, "w") as f:
            for r in rows:
                f.write(json.dumps({"input_ids": r}) + "\n")
        fpt = flops_per_token(shape)
        results = []
        for i, (name, env_change, binary, variant_args) in enumerate(variants):
            losses, tps, rss, own_peak = run_trlhpc(binary, model_dir, data, args.steps, args.threads,
                                                    os.path.join(work, f"out{i}"), env_change,
                                                    args.trlhpc_arg + variant_args)
            results.append((name, losses, tps, rss, own_peak * fpt))
        peers = []
        for mode in ["eager"] + ([] if args.no_compile else ["compile"]):
            losses, tps, rss, opt = run_peer(model_dir, data, args.steps, args.threads, mode, args.bf16)
            peers.append((f"pytorch {mode}{' bf16 autocast' if args.bf16 else ''} (sdpa, {opt} AdamW)", losses, tps, rss,
                          mode))
        peak = max([torch_peak] + [r[4] for r in results])
        best_peer = max(p[2] for p in peers)
        print(f"\nhidden {shape['hidden_size']}, {shape['num_hidden_layers']} layers, {shape['num_attention_heads']}/"
              f"{shape['num_key_value_heads']} heads, intermediate {shape['intermediate_size']}: "
              f"{fpt / 1e6:.1f} MFLOP/token; MFU against {peak / 1e9:.0f} GFLOP/s")
        print(f"{'':40s} {'tokens/s':>9s} {'MFU':>6s} {'peak RSS':>9s} " + " ".join(f"{'vs ' + p[4]:>11s}" for p in peers)
              + f" {'vs best':>8s} {'max rel loss diff':>18s}")
        eager_losses = peers[0][1]
        for name, losses, tps, rss, _ in results + [(p[0], p[1], p[2], p[3], 0) for p in peers]:
            diff = max(abs(a - b) / abs(b) for a, b in zip(losses, eager_losses))
            ratios = " ".join(f"{tps / p[2]:10.2f}x" for p in peers)
            print(f"{name:40s} {tps:9.0f} {100 * tps * fpt / peak:5.1f}% {rss:6.0f} MB {ratios} {tps / best_peer:7.2f}x"
                  f" {diff:18.1e}")
        for name, losses, *_ in results + peers:
            print(f"  loss {name}: " + " ".join(f"{x:.4f}" for x in losses))


if __name__ == "__main__":
    main()
