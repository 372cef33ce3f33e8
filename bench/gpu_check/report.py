#!/usr/bin/env python3
"""The comparisons and the report of bench/gpu_check.sh run.

    report.py curve REF RUN --name N --keys loss,grad_norm --bound 1e-4 [--min_diff 1e-6] [--steps 30]
                            [--results R.jsonl] [--gpu]
        RUN's metrics.jsonl (trlhpc sft) against REF's, step by step: the relative difference
        |run - ref| / |ref| of each key must stay <= bound at every step, over exactly the same steps
        (--steps of them); with --min_diff the loss must also differ somewhere by more than that (a
        bf16 run equal to the fp32 one means bf16 was not in effect). Exit 0 pass, 1 fail, 2 bad input.
    report.py record --results R.jsonl --name N --ok true|false|null --detail TEXT [--gpu] [--value K=V ...]
        appends one stage outcome (null: the stage did not run; the detail says why).
    report.py summarize --results R.jsonl --out DIR [--dry_run] [--commit TEXT]
        writes DIR/h200.json and DIR/summary.md from the recorded outcomes.

Only outcomes recorded with --gpu fill h200.json's fields: a dry run's CPU-vs-CPU comparisons exercise the
same code but leave the GPU fields null. Fields (docs/GPU-CHECK.md says what each means):
"""
import argparse
import json
import math
import sys

# h200.json field -> (stage whose outcome fills it, the value's key; None = the stage's pass/fail)
FIELDS = {
    "op_tests_passed": ("op_tests", None),
    "sanitizer_clean": ("sanitizer", None),
    "fp32_curve_matches_cpu": ("fp32_curve", None),
    "bf16_curve_within_2pct": ("bf16_curve", None),
    "layouts_match": ("layouts", None),
    "mfu": ("benchmark", "mfu"),
    "tokens_per_second": ("benchmark", "tokens_per_second"),
    "peer_tokens_per_second": ("peer", "tokens_per_second"),
    "peak_memory_gib": ("benchmark", "peak_memory_gib"),
    "cudnn_attention_over_kernel": ("attention_choice", "cudnn_over_kernel"),
}
__doc__ += "".join(f"    {k}: stage {s}{'' if v is None else ', value ' + v}\n" for k, (s, v) in FIELDS.items())


def read_curve(path):
    rows = {}
    try:
        for line_no, line in enumerate(open(path), 1):
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if "loss" in r and "step" in r:
                rows[int(r["step"])] = r
    except (OSError, ValueError) as e:
        raise SystemExit(f"report.py: cannot read the curve {path}: {e}")
    return rows


def compare_curves(ref, run, keys, bound, min_diff=None, steps=None):
    """(ok, detail, worst per key): run's curve against ref's."""
    if sorted(ref) != sorted(run):
        return False, f"different steps: reference {sorted(ref)[:3]}..{len(ref)} steps, run {sorted(run)[:3]}..{len(run)}", {}
    if steps is not None and len(ref) != steps:
        return False, f"{len(ref)} logged steps, expected {steps}", {}
    worst = {}
    for k in keys:
        w, at = 0.0, None
        for s in sorted(ref):
            a, b = ref[s].get(k), run[s].get(k)
            if a is None or b is None or not math.isfinite(b) or not math.isfinite(a):
                return False, f"step {s}: {k} missing or not finite (reference {a}, run {b})", worst
            d = abs(b - a) / abs(a) if a != 0 else abs(b)
            if at is None or d > w:
                w, at = d, s
        worst[k] = (w, at)
    parts = [f"{k} worst {w:.3g} (step {s})" for k, (w, s) in worst.items()]
    ok = all(w <= bound for w, _ in worst.values())
    detail = f"{len(ref)} steps, bound {bound:g}: " + ", ".join(parts)
    if ok and min_diff is not None and worst.get("loss", (0, 0))[0] <= min_diff:
        return False, detail + f"; but the loss never differs by more than {min_diff:g}: not in effect", worst
    return ok, detail, worst


def append(results, record):
    if results:
        with open(results, "a") as f:
            f.write(json.dumps(record) + "\n")


def cmd_curve(a):
    ok, detail, worst = compare_curves(read_curve(a.ref), read_curve(a.run), a.keys.split(","), a.bound,
                                       a.min_diff, a.steps)
    print(f"{a.name}: {'PASS' if ok else 'FAIL'}: {detail}")
    append(a.results, {"stage": a.name, "ok": ok, "gpu": a.gpu, "detail": detail,
                       "values": {k: w for k, (w, _) in worst.items()}})
    return 0 if ok else 1


def parse_value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def cmd_record(a):
    ok = {"true": True, "false": False, "null": None}[a.ok]
    values = dict(kv.split("=", 1) for kv in a.value)
    append(a.results, {"stage": a.name, "ok": ok, "gpu": a.gpu, "detail": a.detail,
                       "values": {k: parse_value(v) for k, v in values.items()}})
    return 0


def cmd_summarize(a):
    records = []
    try:
        records = [json.loads(line) for line in open(a.results) if line.strip()]
    except FileNotFoundError:
        pass
    last = {}  # a stage recorded twice: the later outcome counts
    for r in records:
        last[r["stage"]] = r
    out = {"dry_run": a.dry_run, "commit": a.commit}
    reasons = {}
    for field, (stage, key) in FIELDS.items():
        r = last.get(stage)
        if r is None or not r.get("gpu"):
            out[field] = None
            reasons[field] = ("dry run: no GPU call made" if a.dry_run else f"{stage} did not run") if r is None \
                else f"not a GPU result ({stage}: {'not run' if r['ok'] is None else 'ran on the CPU'})"
        elif r["ok"] is None:
            out[field] = None
            reasons[field] = f"{stage} did not run: {r['detail']}"
        elif key is None:
            out[field] = bool(r["ok"])
        else:
            out[field] = r.get("values", {}).get(key) if r["ok"] else None
            if out[field] is None:
                reasons[field] = f"{stage} failed: {r['detail']}"
    out["stages"] = {s: {"ok": r["ok"], "gpu": r.get("gpu", False), "detail": r["detail"]} for s, r in last.items()}
    json.dump(out, open(f"{a.out}/h200.json", "w"), indent=1)
    mark = {True: "pass", False: "FAIL", None: "not run"}
    with open(f"{a.out}/summary.md", "w") as f:
        f.write(f"# GPU check{' (dry run: nothing ran on a GPU)' if a.dry_run else ''}\n\ncommit {a.commit}\n\n")
        f.write("| stage | result | where | detail |\n|---|---|---|---|\n")
        for s, r in last.items():
            f.write(f"| {s} | {mark[r['ok']]} | {'GPU' if r.get('gpu') else 'CPU'} | {r['detail']} |\n")
        f.write("\n## h200.json\n\n| field | value | why null |\n|---|---|---|\n")
        for field in FIELDS:
            f.write(f"| {field} | {json.dumps(out[field])} | {reasons.get(field, '')} |\n")
    print(open(f"{a.out}/summary.md").read())
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("curve")
    c.add_argument("ref")
    c.add_argument("run")
    c.add_argument("--name", required=True)
    c.add_argument("--keys", default="loss,grad_norm")
    c.add_argument("--bound", type=float, required=True)
    c.add_argument("--min_diff", type=float)
    c.add_argument("--steps", type=int)
    c.add_argument("--results", default="")
    c.add_argument("--gpu", action="store_true")
    r = sub.add_parser("record")
    r.add_argument("--results", required=True)
    r.add_argument("--name", required=True)
    r.add_argument("--ok", choices=["true", "false", "null"], required=True)
    r.add_argument("--detail", default="")
    r.add_argument("--gpu", action="store_true")
    r.add_argument("--value", action="append", default=[])
    s = sub.add_parser("summarize")
    s.add_argument("--results", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--dry_run", action="store_true")
    s.add_argument("--commit", default="unknown")
    a = p.parse_args()
    return {"curve": cmd_curve, "record": cmd_record, "summarize": cmd_summarize}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
