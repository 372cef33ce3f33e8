#!/usr/bin/env python3
"""Single-core encode throughput: trlhpc's Tokenizer vs the Hugging Face `tokenizers` library.

    python3 bench/tokenizer_bench.py [--driver build/bench/tokenizer_bench] [--tokenizer DIR] [--mb 10]

Builds a ~10 MB corpus by repeating the "text" rows of ../shared/data/datasets/c4_text.jsonl, encodes
it (add_special_tokens=False) with both on one thread (RAYON_NUM_THREADS=1), checks that the ids are
identical, and prints MB/s (wall clock, and per CPU-second of the encoding thread, which a busy
machine distorts less) and the ratios. Also a "cold" figure: the unique rows once through a fresh
tokenizer, i.e. with an empty word cache.

The driver is bench/tokenizer_bench.cpp, the `tokenizer_bench` target of bench/CMakeLists.txt
(add_executable(tokenizer_bench tokenizer_bench.cpp), linked to trlhpc_lib).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))


def load_library_tokenizer(path):
    """The `tokenizers` object transformers builds for `path` (also for vocab.json + merges.txt)."""
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(path).backend_tokenizer


def best_of(repeat, fn):
    """(best wall seconds, best CPU seconds of this thread) over `repeat` timed runs."""
    fn()  # warm-up: fills the word cache, as the C++ driver does
    best, best_cpu = float("inf"), float("inf")
    if repeat == 0:
        return 0.0, 0.0
    for _ in range(repeat):
        start, cpu_start = time.perf_counter(), time.thread_time()
        fn()
        best_cpu = min(best_cpu, time.thread_time() - cpu_start)
        best = min(best, time.perf_counter() - start)
    return best, best_cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--driver", default=os.path.join(ROOT, "build", "bench", "tokenizer_bench"),
                        help="the built bench/tokenizer_bench.cpp")
    parser.add_argument("--tokenizer", default=os.path.join(SHARED, "qwen2-tokenizer"))
    parser.add_argument("--data", default=os.path.join(SHARED, "datasets", "c4_text.jsonl"))
    parser.add_argument("--mb", type=float, default=10.0, help="corpus size in MB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cold-rows", type=int, default=300,
                        help="unique rows encoded once by a fresh tokenizer (empty word cache) for the cold figure")
    args = parser.parse_args()

    with open(args.data) as f:
        rows = [json.loads(line)["text"] for line in f if line.strip()]
    texts, size = [], 0
    while size < args.mb * 1e6:
        for row in rows:
            texts.append(row)
            size += len(row.encode())
    tok = load_library_tokenizer(args.tokenizer)
    cold_texts = rows[:args.cold_rows]
    cold_mb = sum(len(t.encode()) for t in cold_texts) / 1e6
    start = time.thread_time()
    for t in cold_texts:
        tok.encode(t, add_special_tokens=False)
    cold_cpu = time.thread_time() - start

    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.jsonl")
        ids_file = os.path.join(tmp, "ids.jsonl")
        with open(corpus, "w") as f:
            for text in texts:
                f.write(json.dumps({"text": text}) + "\n")
        out = subprocess.run([args.driver, args.tokenizer, corpus, "--repeat", str(args.repeat), "--dump", ids_file],
                             check=True, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        cpp = json.loads(out.stdout.strip().splitlines()[-1])
        with open(ids_file) as f:
            cpp_ids = [json.loads(line) for line in f]
        cold_corpus = os.path.join(tmp, "cold.jsonl")
        with open(cold_corpus, "w") as f:
            for text in cold_texts:
                f.write(json.dumps({"text": text}) + "\n")
        out = subprocess.run([args.driver, args.tokenizer, cold_corpus, "--repeat", "0"],
                             check=True, capture_output=True, text=True)
        cpp_cold = json.loads(out.stdout.strip().splitlines()[-1])

    loop_s, loop_cpu = best_of(args.repeat, lambda: [tok.encode(t, add_special_tokens=False) for t in texts])
    batch_s, batch_cpu = best_of(args.repeat, lambda: tok.encode_batch(texts, add_special_tokens=False))
    lib_ids = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    same = sum(a == b for a, b in zip(cpp_ids, lib_ids))

    mb = size / 1e6
    print(f"corpus: {mb:.2f} MB, {len(texts)} texts, {sum(map(len, lib_ids))} tokens; tokenizer {args.tokenizer}")
    print(f"identical ids: {same}/{len(texts)} texts")
    # encode_batch runs on a rayon worker, so its CPU time is not this thread's: wall time only.
    print("                                      wall MB/s   MB per CPU-second")
    print(f"tokenizers encode loop             : {mb / loop_s:8.2f}    {mb / loop_cpu:8.2f}")
    print(f"tokenizers encode_batch, 1 thread  : {mb / batch_s:8.2f}")
    print(f"trlhpc Tokenizer::encode           : {cpp['mb_per_s']:8.2f}    {cpp['mb_per_cpu_s']:8.2f}"
          f"   (load {cpp['load_seconds']:.2f} s)")
    print(f"ratio trlhpc / tokenizers loop     : {cpp['mb_per_s'] * loop_s / mb:8.2f}x   "
          f"{cpp['mb_per_cpu_s'] * loop_cpu / mb:8.2f}x")
    print(f"ratio trlhpc / tokenizers batch    : {cpp['mb_per_s'] * batch_s / mb:8.2f}x")
    cpp_cold_rate = cold_mb / cpp_cold["first_pass_cpu_seconds"]
    print(f"cold (fresh tokenizer, {len(cold_texts)} unique rows, {cold_mb:.2f} MB), MB per CPU-second: "
          f"tokenizers {cold_mb / cold_cpu:.2f}, trlhpc {cpp_cold_rate:.2f}, ratio {cpp_cold_rate * cold_cpu / cold_mb:.2f}x")
    return 0 if same == len(texts) else 1


if __name__ == "__main__":
    sys.exit(main())
