#!/usr/bin/env python3
# Summary table of bench/RESULTS.md "Communication overlap (issue 17)" from the output of
#   SHARDINGS="none zero2 zero3" NPS="2 4" PROGRESS="none thread" bench/dp_bench.sh build --steps 5
# and MODES=cp ... bench/cp_bench.sh build, concatenated in run order: python3 bench/overlap_summary.py LOG
import re, statistics, sys
# Parses dp_bench/cp_bench rows in run order; none/thread runs come in consecutive pairs. A pair is kept
# when both runs were undisturbed: T_self under 480 ms (np 2) / 1000 ms (np 4) for dp_bench (quiet ~400 /
# ~850 ms), attention fwd+bwd under 0.25 s for cp_bench (quiet 0.13-0.19 s).
runs = []
for line in open(sys.argv[1]):
    if not line.startswith("|"): continue
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if c[0].startswith("cp"):
        runs.append(dict(layout="ring cp", prog=c[1].split()[0], np=int(c[0].split()[1]), step=float(c[6]) * 1e3,
                         alone=float(c[9]), wait=float(c[10]), skew=float(c[11]), cpu=None,
                         quiet=float(c[3]) < 0.25))
    else:
        m = re.search(r"\((\d+) ms CPU\)", c[1])
        np_ = int(c[2])
        runs.append(dict(layout={"none": "DDP", "zero2": "ZeRO-2", "zero3": "ZeRO-3"}[c[0]], prog=c[1].split()[0], np=np_,
                         step=float(c[7]), alone=float(c[8]), wait=float(c[9]), skew=float(c[10]),
                         cpu=float(m.group(1)) if m else None, quiet=float(c[6]) < (480 if np_ == 2 else 1000)))
groups, dropped = {}, {}
for a, b in zip(runs[0::2], runs[1::2]):
    assert a["prog"] == "none" and b["prog"] == "thread" and a["layout"] == b["layout"] and a["np"] == b["np"]
    keep = a["quiet"] and b["quiet"]
    for r in (a, b):
        (groups if keep else dropped).setdefault((r["layout"], r["np"], r["prog"]), []).append(r)
med = lambda xs: statistics.median(xs)
order = ["DDP", "ZeRO-2", "ZeRO-3", "ring cp"]
print("| layout | ranks | progress | quiet pairs | step ms | alone ms | wait ms (each pair) | wait ms | skew ms | hidden | thread CPU ms/step | disturbed pairs: wait ms |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
keys = sorted(set(groups) | set(dropped), key=lambda k: (order.index(k[0]), k[1], k[2] != "none"))
for k in keys:
    r = groups.get(k, [])
    d = ", ".join(f"{x['wait']:.1f}" for x in dropped.get(k, [])) or "-"
    if not r:
        print(f"| {k[0]} | {k[1]} | {k[2]} | 0 | - | - | - | - | - | - | - | {d} |"); continue
    step, alone, wait, skew = (med([x[f] for x in r]) for f in ("step", "alone", "wait", "skew"))
    cpus = [x["cpu"] for x in r if x["cpu"] is not None]
    hidden = max(0.0, min(1.0, 1 - wait / alone))
    each = ", ".join(f"{x['wait']:.1f}" for x in r)
    cpu = f"{med(cpus):.0f}" if cpus else "-"
    print(f"| {k[0]} | {k[1]} | {k[2]} | {len(r)} | {step:.0f} | {alone:.1f} | {each} | {wait:.1f} | {skew:.1f} | {100*hidden:.0f}% | {cpu} | {d} |")
