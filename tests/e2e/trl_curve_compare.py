#!/usr/bin/env python3
"""Comparisons of trlhpc against a TRL SFTTrainer fixture (tests/fixtures/make_trl_curves.py and
make_trl_curves_families.py), shared by tests/e2e/test_trl_curves.sh (Qwen2), test_trl_curves_qwen3.sh and
test_trl_curves_families.sh.

  trl_curve_compare.py tokens TRL_TOKENIZED.jsonl OURS.jsonl
      `trlhpc tokenize` output (input_ids, loss_mask) against TRL's tokenized rows (input_ids, labels = -100
      where not trained): the same ids and trained positions, row by row. `trlhpc tokenize` prints every row;
      the rows truncation left without a label, which TRL (and `trlhpc sft`) drop, are left out here.
  trl_curve_compare.py curve CURVES.json METRICS.jsonl RUN BOUND...
      every logged step of trlhpc's METRICS against TRL's run RUN of CURVES.json. BOUND: METRIC=REL (relative
      bound) or mean_token_accuracy=one_flip. Steps, learning_rate (1e-9 relative), num_tokens and epoch are
      always compared. Prints the worst difference of each bounded metric and the first failures; exit 1 on any.
  trl_curve_compare.py runs REFERENCE.jsonl METRICS.jsonl METRIC=REL...
      two trlhpc runs of one job (another parallel layout against 1 rank): every logged step, as `curve`
      compares them, with relative bounds only (no one_flip: no per-micro-step target counts here).
"""
import json
import sys


def tokens(trl_file, ours_file):
    trl = [json.loads(line) for line in open(trl_file)]
    ours = [json.loads(line) for line in open(ours_file)]
    ours = [o for o in ours if any(o["loss_mask"])]
    assert len(ours) == len(trl), (len(ours), len(trl))
    for i, (t, o) in enumerate(zip(trl, ours)):
        labels = [tok if trained else -100 for tok, trained in zip(o["input_ids"], o["loss_mask"])]
        assert o["input_ids"] == t["input_ids"], f"row {i}: input_ids differ"
        assert labels == t["labels"], f"row {i}: trained positions differ"
    print(f"    {len(ours)} rows, {sum(len(t['input_ids']) for t in trl)} tokens identical")
    return 0


def relative(x, y):
    return abs(x - y) / abs(y) if y else abs(x)


def logged_steps(metrics):
    return [json.loads(line) for line in open(metrics) if '"loss"' in line]


def compare_steps(ours, ref, bound_args, ref_name, targets=None, accumulation=None):
    """Prints the worst difference of each bounded metric and the first failures; returns 1 on any."""
    bounds = dict(b.split("=") for b in bound_args)
    assert [r["step"] for r in ours] == [r["step"] for r in ref], ([r["step"] for r in ours], [r["step"] for r in ref])
    worst, failed = {}, []
    for o, t in zip(ours, ref):
        step = o["step"]
        if o["num_tokens"] != t["num_tokens"] or abs(o["epoch"] - t["epoch"]) > 1e-12:
            failed.append(f"step {step}: num_tokens/epoch {o['num_tokens']}/{o['epoch']} vs {t['num_tokens']}/{t['epoch']}")
        if relative(o["learning_rate"], t["learning_rate"]) > 1e-9:
            failed.append(f"step {step}: learning_rate {o['learning_rate']} vs {t['learning_rate']}")
        for key, bound in bounds.items():
            if bound == "one_flip":
                # One argmax flip in micro-step m moves the step's mean_token_accuracy (the mean over its
                # micro-steps) by 1 / (accumulation steps x target tokens of m); the fixture records TRL's
                # target tokens per micro-step.
                micro = targets[(step - 1) * accumulation:step * accumulation]
                limit, diff = 1.0 / (accumulation * min(micro)) + 1e-7, abs(o[key] - t[key])
            else:
                limit, diff = float(bound), relative(o[key], t[key])
            worst[key] = max(worst.get(key, (0.0, 0)), (diff, step))
            if diff > limit:
                failed.append(f"step {step}: {key} {o[key]:.9g} vs {ref_name} {t[key]:.9g} (difference {diff:.3g} > {limit:.3g})")
    print("    " + ", ".join(f"{k} worst {d:.2g} at step {s}" for k, (d, s) in worst.items()))
    for line in failed[:8]:
        print("    " + line)
    return 1 if failed else 0


def curve(curves_file, metrics, run, *bound_args):
    record = json.load(open(curves_file))
    return compare_steps(logged_steps(metrics), record["runs"][run]["steps"], bound_args, "TRL",
                         targets=record["runs"][run]["micro_step_targets"],
                         accumulation=record["settings"]["gradient_accumulation_steps"])


def runs(reference, metrics, *bound_args):
    assert bound_args and all(not b.endswith("=one_flip") for b in bound_args), bound_args
    return compare_steps(logged_steps(metrics), logged_steps(reference), bound_args, "reference")


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    sys.exit({"tokens": tokens, "curve": curve, "runs": runs}[command](*args))
