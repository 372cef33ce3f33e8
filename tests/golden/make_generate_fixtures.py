#!/usr/bin/env python3
"""Greedy continuations from transformers' `generate` for trlhpc's KV-cache decoding tests
(tests/unit/test_generate_golden.cpp, tests/mpi/test_generate_tensor_parallel.cpp, tests/e2e/test_generate.sh).

Run by hand where torch and transformers are installed (pip install torch transformers safetensors):
    python3 tests/golden/make_generate_fixtures.py [--data ../shared/data] [--only qwen3_tiny]
It writes tests/golden/generate_expected.json (--only NAME: recomputes that tiny model's cases and keeps
the file's other cases as they are; the random prompts are drawn for every model in the same order, so
they are those a full run draws):
    {"generator": versions, "cases": [{"name", "model" (path relative to the repository root, or
      "shared:" + a folder of --data), "prompt" (text, when the case is text), "input_ids",
      "max_new_tokens", "eos_token_ids", "output_ids" (the new tokens, as generate returns them),
      "text" (output_ids decoded, special tokens skipped), "min_margin" (smallest gap between the
      chosen and the runner-up logit over the steps: how far greedy is from a tie)}]}
Models: the real pretrained stories260K (Llama, with its tokenizer; text prompts encoded with BOS as
`tokenizer(prompt)` does), and the tiny random Qwen2, Llama, Qwen3, Mistral, sliding Qwen3, SmolLM3, Gemma 3 and
Gemma 2 (softcapped logits: greedy picks among the capped values) of tests/golden (token-id prompts; 5 or 9 prompt tokens + 40 new ones run far past the sliding windows of 3 and 4,
so transformers' sliding-window caches drop keys that trlhpc keeps and masks).
The models run in float32, as `generate` does by default for these fp32 checkpoints.
"""
import argparse
import json
import os

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TINY_MODELS = ["qwen2_tiny", "llama_tiny", "qwen3_tiny",  # appended in this order: prompts stay reproducible
               "mistral_tiny", "qwen3_sliding_tiny", "smollm3_tiny", "gemma3_tiny", "gemma2_tiny"]


def run(model, input_ids, max_new_tokens, eos):
    out = model.generate(torch.tensor([input_ids]), attention_mask=torch.ones(1, len(input_ids), dtype=torch.long),
                         max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos, pad_token_id=0,
                         output_scores=True, return_dict_in_generate=True)
    new = out.sequences[0, len(input_ids):].tolist()
    margin = min(float(s[0].topk(2).values[0] - s[0].topk(2).values[1]) for s in out.scores)
    return new, margin


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    parser.add_argument("--only", help="recompute only this tiny model's cases, keep the others")
    args = parser.parse_args()
    torch.manual_seed(0)
    out_path = os.path.join(HERE, "generate_expected.json")
    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    if args.only:
        with open(out_path) as f:
            old = json.load(f)
        cases = [c for c in old["cases"] if not c["name"].startswith(args.only + "_")]
        versions = f"{old['generator'].split('; ')[0]}; {args.only}: {versions}"
    else:
        cases = stories_cases(args.data)
    generator = torch.Generator().manual_seed(1234)
    for name in TINY_MODELS:
        path = os.path.join(HERE, name, "model")
        # use_kernels=False: transformers 5.25 otherwise asks for the hub `kernels` package on CPU
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, use_kernels=False).eval()
        for i in range(2):
            ids = torch.randint(0, model.config.vocab_size, (5 + 4 * i,), generator=generator).tolist()
            if args.only and name != args.only:
                continue
            new, margin = run(model, ids, 40, None)
            cases.append({"name": f"{name}_{i}", "model": os.path.relpath(path, ROOT), "input_ids": ids,
                          "max_new_tokens": 40, "eos_token_ids": [], "output_ids": new, "min_margin": margin})
    fixture = {"generator": versions, "cases": cases}
    with open(out_path, "w") as f:
        json.dump(fixture, f, indent=1)
        f.write("\n")
    for c in cases:
        print(c["name"], "margin", round(c["min_margin"], 4), c.get("text", c["output_ids"]))


def stories_cases(data):
    cases = []
    stories = os.path.join(data, "stories260K")
    tok = AutoTokenizer.from_pretrained(stories)
    model = AutoModelForCausalLM.from_pretrained(stories, dtype=torch.float32).eval()
    eos = [model.config.eos_token_id]
    for i, prompt in enumerate(["Once upon a time", "Tom had a red ball. He", "The sun was shining and"]):
        ids = tok(prompt)["input_ids"]
        new, margin = run(model, ids, 48, eos)
        cases.append({"name": f"stories260K_{i}", "model": "shared:stories260K", "prompt": prompt, "input_ids": ids,
                      "max_new_tokens": 48, "eos_token_ids": eos, "output_ids": new,
                      "text": tok.decode(new, skip_special_tokens=True), "min_margin": margin})
    return cases


if __name__ == "__main__":
    main()
