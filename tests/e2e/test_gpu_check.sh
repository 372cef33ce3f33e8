#!/usr/bin/env bash
# bench/gpu_check.sh (the one-shot H200 check, docs/GPU-CHECK.md) on this GPU-less machine:
#  1. `run --dry-run --bin BUILD` goes as far as the first GPU call: the CPU reference curves of stories260K,
#     the comparisons on CPU-vs-CPU curves (CPU fp32 twice: within 1e-4; CPU --bf16: within 2 % and not
#     equal), one 2-rank layout, gpu_bench's batch dump (CUDA builds); it exits 0, names what it skipped,
#     and its h200.json has every field, all null (nothing ran on a GPU).
#  2. The comparison's controls on those CPU-made curves (report.py curve, what decides the fields):
#     a loss curve 3 % off fails the bf16 check and 1 % off passes it; 2e-4 off fails the fp32 check
#     (1e-4); a bf16 curve equal to the fp32 one fails (bf16 not in effect); a missing step fails; and
#     `summarize` fills the fields from GPU outcomes only, null with the reason otherwise.
#  3. With a prepared .gpu/ (bench/gpu_check.sh prepare; never made in CI: it builds for minutes), `run
#     --dry-run` unpacks it and checks ldd as on the GPU machine; without one it says SKIP.
# 5 steps instead of 30 (GPU_CHECK_STEPS) keep this within a minute on 2 busy cores (about 20 s of CPU).
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
BUILD=$(cd "$(dirname "$TRLHPC")" && pwd)
T=$WORK
DATA=${TRLHPC_SHARED_DATA:-$ROOT/../shared/data}
[ -f "$DATA/stories260K/model.safetensors" ] || skip "no stories260K under $DATA"
export SHARED_DATA=$DATA GPU_CHECK_STEPS=5 MPIRUN
REPORT=(python3 "$ROOT/bench/gpu_check/report.py")

# 1. The dry run from the build's binaries.
OUT=$T/out GPU_CHECK_WORK=$T/work bash "$ROOT/bench/gpu_check.sh" run --dry-run --bin "$BUILD" > "$T/dry.log" 2>&1 ||
  { cat "$T/dry.log"; for f in "$T"/out/*.log; do echo "== $f"; tail -20 "$f"; done; fatal "run --dry-run exited $?"; }
for f in summary.md h200.json setup.log op_tests.log curves.log benchmark.log layouts.log sanitizer.log; do
  [ -s "$T/out/$f" ] || fatal "the dry run wrote no $f"
done
python3 - "$T/out/h200.json" <<'PY' || fatal "h200.json of the dry run"
import json, sys
d = json.load(open(sys.argv[1]))
fields = ["op_tests_passed", "sanitizer_clean", "fp32_curve_matches_cpu", "bf16_curve_within_2pct", "layouts_match",
          "mfu", "tokens_per_second", "peer_tokens_per_second", "peak_memory_gib", "cudnn_attention_over_kernel"]
missing = [f for f in fields if f not in d]
assert not missing, f"fields missing: {missing}"
assert all(d[f] is None for f in fields), {f: d[f] for f in fields}
assert d["dry_run"] is True
st = d["stages"]
for s in ("fp32_curve", "bf16_curve", "layouts"):
    assert st[s]["ok"] is True and st[s]["gpu"] is False, (s, st[s])
assert st["attention_choice"]["ok"] is None and "--cuda_attention cudnn" in st["attention_choice"]["detail"], \
    st["attention_choice"]
print("    dry run: every field null; CPU comparisons passed:", st["fp32_curve"]["detail"], "|", st["bf16_curve"]["detail"])
PY
grep -q "dry run" "$T/out/summary.md" || fatal "summary.md does not say it was a dry run"
grep -q "skipped: the other 9" "$T/out/layouts.log" || fatal "layouts.log does not say which layouts it skipped"
grep -q "skipped" "$T/out/summary.md" || fatal "summary.md does not say what the dry run skipped"
if [ -x "$BUILD/bench/gpu_bench" ]; then
  grep -q "dumped a 1x512 packed batch" "$T/out/summary.md" || fatal "gpu_bench --dump_batch did not run"
  grep -q "exited 77 (no CUDA device visible" "$T/out/summary.md" || fatal "the CUDA test binary did not stop at the missing GPU"
fi

# 2. The comparisons' controls on the CPU-made curves.
W=$T/work
off() {  # off SRC DST FACTOR: the curve with every loss times FACTOR
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if "loss" in r:
            r["loss"] *= float(sys.argv[3])
        out.write(json.dumps(r) + "\n")
PY
}
ref=$W/cpu_fp32/metrics.jsonl
off "$ref" "$T/off3.jsonl" 1.03
off "$ref" "$T/off1.jsonl" 1.01
off "$ref" "$T/off2e4.jsonl" 1.0002
bf16() { "${REPORT[@]}" curve "$ref" "$1" --name bf16 --keys loss --bound 0.02 --min_diff 1e-6 --steps 5 > "$T/c.log" 2>&1; }
fp32() { "${REPORT[@]}" curve "$ref" "$1" --name fp32 --keys loss,grad_norm --bound 1e-4 --steps 5 > "$T/c.log" 2>&1; }
bf16 "$T/off3.jsonl" && fatal "a loss curve 3 % off passed the bf16 check: $(cat "$T/c.log")"
grep -q "loss worst 0.03 " "$T/c.log" || fatal "the 3 % curve's worst difference is not reported as 0.03: $(cat "$T/c.log")"
bf16 "$T/off1.jsonl" || fatal "a loss curve 1 % off failed the bf16 check: $(cat "$T/c.log")"
bf16 "$W/gpu_bf16/metrics.jsonl" || fatal "CPU --bf16 against CPU fp32: $(cat "$T/c.log")"
bf16 "$ref" && fatal "a bf16 curve equal to the fp32 one passed (bf16 not in effect): $(cat "$T/c.log")"
grep -q "not in effect" "$T/c.log" || fatal "an equal bf16 curve is not reported as 'not in effect'"
fp32 "$W/gpu_fp32/metrics.jsonl" || fatal "two CPU fp32 runs differ: $(cat "$T/c.log")"
fp32 "$T/off2e4.jsonl" && fatal "a curve 2e-4 off passed the fp32 check (1e-4)"
head -4 "$ref" > "$T/short.jsonl"
fp32 "$T/short.jsonl" && fatal "a curve missing its last step passed"
grep -q "different steps" "$T/c.log" || fatal "a missing step is not named: $(cat "$T/c.log")"

R=$T/results.jsonl
"${REPORT[@]}" record --results "$R" --name op_tests --ok true --detail "14 binaries" --gpu
"${REPORT[@]}" record --results "$R" --name benchmark --ok true --detail x --gpu --value tokens_per_second=51234.5 \
  --value mfu=0.41 --value peak_memory_gib=12.5
"${REPORT[@]}" record --results "$R" --name sanitizer --ok null --detail "compute-sanitizer is not on PATH here" --gpu
"${REPORT[@]}" record --results "$R" --name layouts --ok true --detail "CPU only"
"${REPORT[@]}" curve "$ref" "$T/off3.jsonl" --name bf16_curve --keys loss --bound 0.02 --results "$R" --gpu > /dev/null
mkdir -p "$T/sum"
"${REPORT[@]}" summarize --results "$R" --out "$T/sum" --commit abc > /dev/null
python3 - "$T/sum/h200.json" <<'PY' || fatal "summarize"
import json, sys
d = json.load(open(sys.argv[1]))
want = {"op_tests_passed": True, "tokens_per_second": 51234.5, "mfu": 0.41, "peak_memory_gib": 12.5,
        "sanitizer_clean": None, "layouts_match": None, "bf16_curve_within_2pct": False, "fp32_curve_matches_cpu": None,
        "peer_tokens_per_second": None, "dry_run": False}
got = {k: d[k] for k in want}
assert got == want, got
PY
grep -q "sanitizer_clean | null | sanitizer did not run: compute-sanitizer is not on PATH here" "$T/sum/summary.md" ||
  fatal "summary.md does not give the reason of a null field: $(grep sanitizer "$T/sum/summary.md")"
grep -q "layouts_match | null | not a GPU result (layouts: ran on the CPU)" "$T/sum/summary.md" ||
  fatal "a CPU outcome filled or mislabelled a GPU field: $(grep layouts_match "$T/sum/summary.md")"

# 3. A prepared .gpu/: unpack + ldd as on the GPU machine.
if [ -f "$ROOT/.gpu/bin.tar.xz" ]; then
  OUT=$T/packed bash "$ROOT/bench/gpu_check.sh" run --dry-run > "$T/packed.log" 2>&1 ||
    { cat "$T/packed.log"; tail -30 "$T/packed/setup.log"; fatal "run --dry-run on the prepared .gpu/ failed"; }
  grep -q "ldd: every library found" "$T/packed/setup.log" || fatal "the packed dry run did not check ldd"
  echo "    prepared .gpu/: unpacked, ldd clean, dry run passed"
else
  echo "SKIP part 3: no prepared .gpu/ in $ROOT (bench/gpu_check.sh prepare makes it; CI never does)"
fi
echo PASS
e2e_end
