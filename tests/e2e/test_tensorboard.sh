#!/usr/bin/env bash
# --report_to tensorboard end to end: the tiny-chat job (1 rank, then 2 ranks with --logging_dir) writes
# event files that the `tensorboard` package (PyPI) reads back; every numeric field of every
# metrics.jsonl line is there under Hugging Face's tag name (train/X, eval/X for eval_X) at its step,
# equal to the line's value rounded to float32 (TensorBoard's simple_value), and nothing else is.
# Only global rank 0 writes (one event file per run). The default (--report_to none, as transformers 5)
# writes none. Without the
# tensorboard package the test is reported as SKIPPED by ctest (exit 77).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
python3 -c "from tensorboard.backend.event_processing import event_file_loader" 2>/dev/null ||
  skip "the tensorboard Python package is not importable here (pip install tensorboard to run this test)"
COMMON=(--config examples/tiny-chat/sft.yaml --logging_steps 2 --eval_steps 3 --max_length 128
        --dataset_cache_dir none)

"$TRLHPC" sft "${COMMON[@]}" --max_steps 6 --output_dir "$WORK/one" --report_to tensorboard > "$WORK/one.log" 2>&1 || { cat "$WORK/one.log"; fatal "sft --report_to tensorboard on 1 rank"; }
"$MPIRUN" --oversubscribe --bind-to none -np 2 "$TRLHPC" sft "${COMMON[@]}" --max_steps 6 --output_dir "$WORK/two" \
  --logging_dir "$WORK/tb_two" --report_to all > "$WORK/two.log" 2>&1 || { cat "$WORK/two.log"; fatal "sft --report_to all on 2 ranks"; }
"$TRLHPC" sft "${COMMON[@]}" --max_steps 2 --output_dir "$WORK/none" > "$WORK/none.log" 2>&1 \
  || { cat "$WORK/none.log"; fatal "sft with the default --report_to"; }

python3 - "$WORK" <<'PY' || fail "the event files do not hold exactly metrics.jsonl's values"
import glob, json, os, struct, sys
import numpy as np
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

def framing_ok(path):
    """Every TFRecord's length and payload CRCs, checked with tensorboard's own masked CRC-32C (its
    reader skips a bad record at the end of a file silently, so the loader alone would not notice)."""
    data, offset, records = open(path, "rb").read(), 0, 0
    while offset < len(data):
        header = data[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        payload = data[offset + 12:offset + 12 + length]
        if struct.unpack("<I", data[offset + 8:offset + 12])[0] != masked_crc32c(header) or \
           struct.unpack("<I", data[offset + 12 + length:offset + 16 + length])[0] != masked_crc32c(payload):
            print(f"FAIL {path}: bad CRC in record {records}")
            return False
        offset += 16 + length
        records += 1
    return records > 1
work = sys.argv[1]

def check(name, metrics_path, logdir):
    """True when the event file under logdir holds exactly the scalars of metrics_path."""
    files = glob.glob(os.path.join(logdir, "**", "*tfevents*"), recursive=True)
    if len(files) != 1:
        print(f"FAIL {name}: expected one event file under {logdir}, found {files}"); return False
    ok = framing_ok(files[0])
    got = {}
    first = True
    for event in event_file_loader.LegacyEventFileLoader(files[0]).Load():
        if first:
            if event.file_version != "brain.Event:2":
                print(f"FAIL {name}: first event is not the file version: {event}"); ok = False
            first = False
            continue
        for v in event.summary.value:
            got[(v.tag, event.step)] = v.simple_value
    want = {}
    for line in open(metrics_path):
        row = json.loads(line)
        for key, value in row.items():
            if key == "step" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            tag = "eval/" + key[5:] if key.startswith("eval_") else "train/" + key
            want[(tag, row["step"])] = float(np.float32(value))
    if got != want:
        for k in sorted(set(got) | set(want)):
            if got.get(k) != want.get(k):
                print(f"FAIL {name}: {k}: event file {got.get(k)} metrics.jsonl {want.get(k)}")
        ok = False
    tags = sorted({t for t, _ in want})
    print(f"{name}: {len(want)} scalars over {len({s for _, s in want})} steps equal; tags {tags}")
    for needed in ["train/loss", "train/grad_norm", "train/learning_rate", "train/epoch", "eval/loss",
                   "train/tokens_per_second", "train/mfu", "train/peak_memory_mib"]:
        if needed not in tags:
            print(f"FAIL {name}: no {needed}"); ok = False
    return ok

results = [check("1 rank, default logging_dir", f"{work}/one/metrics.jsonl", f"{work}/one/runs"),
           check("2 ranks, --logging_dir", f"{work}/two/metrics.jsonl", f"{work}/tb_two")]
stray = glob.glob(f"{work}/none/**/*tfevents*", recursive=True)
if stray:
    print(f"FAIL the default (--report_to none) wrote {stray}")
results.append(not stray)
print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
sys.exit(0 if all(results) else 1)
PY
e2e_end
