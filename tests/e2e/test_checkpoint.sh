#!/usr/bin/env bash
# Checkpoints end to end with the trlhpc binary on the bundled tiny-chat job (real tokenizer, chat
# template, packing, eval):
#  1. --save_steps 3 over 9 steps writes checkpoint-3, -6, -9; `latest` names -9.
#  2. Same layout (2 ranks DDP; also with 2 accumulation micro-steps) resumed from checkpoint-3: steps
#     4-9 and the evals are bit-identical to the uninterrupted run, and metrics.jsonl reads as one run (no line twice); with
#     --save_total_limit 2 only checkpoint-6 and -9 remain.
#  3. Another layout and world size (1 rank with 2x accumulation; 2 ranks ZeRO-3; 4 ranks tp 2 x cp 2):
#     within 1e-5 relative per logged loss (fp32 summation order only, as the layout-equivalence tests).
#  4. `trlhpc export` on 1 and 3 ranks gives the final model's safetensors byte for byte.
#  5. Bad resumes, the same message on every rank, exit 1: another tokenizer, a format version from
#     the future, a checkpoint without manifest (an interrupted save), a flipped byte (names the tensor),
#     another global batch.
#  6. kill -9 of one rank while a checkpoint is being written: the earlier checkpoints stay intact,
#     `latest` resolves to a complete one, and the job resumed from it finishes with the uninterrupted
#     run's losses.
#  7. --async_save: the same run writes checkpoints whose manifests (shapes and per-dataset checksums
#     of every tensor) equal the synchronous ones and the same metrics and model; resuming from one is
#     bit-identical; kill -9 during a background write behaves as in 6.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"

sft() {  # sft NP OUT LOG FLAGS...
  local np=$1 out=$2 log=$3
  shift 3
  trlhpc_np 300 "$np" sft --config examples/tiny-chat/sft.yaml --max_steps 9 \
    --logging_steps 1 --eval_steps 3 --peak_flops 1e12 --output_dir "$out" "$@" >"$log" 2>&1
}

compare() {  # compare A B BOUND [epoch]: metrics of B's steps equal (BOUND 0) or close to A's; no step twice in B
  # The logged epoch counts micro-batches of per_device x dp rows (HF's Trainer does), so it is compared
  # only between layouts with the same per_device x dp (pass "noepoch" otherwise).
  python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" "${4:-epoch}" <<'PY'
import json, sys
def rows(p):
    out = {}
    for line in open(p):
        r = json.loads(line)
        key = (r["step"], "eval_loss" in r)
        assert key not in out, f"{p}: step {key} logged twice"
        out[key] = r
    return out
a, b, bound = rows(sys.argv[1]), rows(sys.argv[2]), float(sys.argv[3])
keys = ("loss", "grad_norm", "learning_rate", "eval_loss", "num_tokens") + (("epoch",) if sys.argv[4] == "epoch" else ())
assert set(a) == set(b), (sorted(a), sorted(b))
worst = 0.0
for key, r in b.items():
    for k in keys:
        if k in r:
            x, y = r[k], a[key][k]
            worst = max(worst, abs(x - y) / abs(y) if y else abs(x))
print(f"    {len(b)} lines, worst relative difference {worst:.3g}")
assert worst <= bound, worst
PY
}

# 1. The uninterrupted run, saving every 3 steps.
sft 2 "$WORK/full" "$WORK/full.log" --save_steps 3 || fail "full run: exit $?"
for s in 3 6 9; do [ -f "$WORK/full/checkpoint-$s/manifest.json" ] || fail "checkpoint-$s missing"; done
[ "$(cat "$WORK/full/latest" 2>/dev/null)" = "checkpoint-9" ] || fail "latest is not checkpoint-9"

resume() {  # resume NAME NP FLAGS...: a folder holding checkpoint-3 and the metrics of run $FROM (default
            # full; the lines after step 3 stand for those an interrupted run logged), resumed from latest
  local name=$1 np=$2 from=${FROM:-full}
  shift 2
  mkdir -p "$WORK/$name"
  cp -r "$WORK/$from/checkpoint-3" "$WORK/$name/"
  cp "$WORK/$from/metrics.jsonl" "$WORK/$name/"
  sft "$np" "$WORK/$name" "$WORK/$name.log" --resume_from_checkpoint latest "$@" || {
    fail "$name: exit $?"
    tail -5 "$WORK/$name.log"
  }
}

# 2. Same layout: bit-identical.
echo "same layout (2 ranks DDP)"
resume same 2 --save_steps 3 --save_total_limit 2
ls "$WORK/same" | grep -q '^checkpoint-3$' && fail "save_total_limit 2 kept checkpoint-3"
for s in 6 9; do [ -f "$WORK/same/checkpoint-$s/manifest.json" ] || fail "same: checkpoint-$s missing"; done
[ "$(cat "$WORK/same/latest" 2>/dev/null)" = "checkpoint-9" ] || fail "same: latest is not checkpoint-9"
grep -q "resumed from .*checkpoint-3 after step 3" "$WORK/same.log" || fail "same: no resume line"
compare "$WORK/full" "$WORK/same" 0 || fail "same layout: not bit-identical"
cmp -s "$WORK/full/model.safetensors" "$WORK/same/model.safetensors" || fail "same layout: final model differs"
echo "same layout with gradient accumulation (2 ranks, 1 row x 2 micro-steps)"
sft 2 "$WORK/acc" "$WORK/acc.log" --save_steps 3 --per_device_train_batch_size 1 --gradient_accumulation_steps 2 ||
  fail "accumulation run: exit $?"
FROM=acc resume acc-same 2 --per_device_train_batch_size 1 --gradient_accumulation_steps 2
compare "$WORK/acc" "$WORK/acc-same" 0 || fail "same layout with accumulation: not bit-identical"

# 3. Other layouts and world sizes, the global batch kept (2 rows x dp 2 = 4).
echo "1 rank, accumulation 2"
resume one 1 --gradient_accumulation_steps 2
compare "$WORK/full" "$WORK/one" 1e-5 noepoch || fail "1 rank: losses differ"
echo "2 ranks ZeRO-3, 1 row each x accumulation 2"
# The zero3 profile says mixed_precision: bf16 (as TRL's file): --bf16 false keeps this an fp32 comparison.
resume zero3 2 --accelerate_config zero3 --bf16 false --per_device_train_batch_size 1 --gradient_accumulation_steps 2
compare "$WORK/full" "$WORK/zero3" 1e-5 noepoch || fail "zero3: losses differ"
echo "4 ranks tp 2 x cp 2, 4 rows"
resume tpcp 4 --tp_size 2 --cp_size 2 --per_device_train_batch_size 4
compare "$WORK/full" "$WORK/tpcp" 1e-5 || fail "tp 2 x cp 2: losses differ"

# 4. Export on 1 and 3 ranks = the model the run saved at its end (same weights as checkpoint-9).
for np in 1 3; do
  trlhpc_np 120 $np export "$WORK/full/checkpoint-9" --output_dir "$WORK/export$np" \
    >"$WORK/export$np.log" 2>&1 || fail "export on $np ranks: exit $?"
  cmp -s "$WORK/full/model.safetensors" "$WORK/export$np/model.safetensors" || fail "export on $np ranks differs"
  [ -f "$WORK/export$np/tokenizer.json" ] || fail "export on $np ranks: no tokenizer.json"
done

# 5. Bad resumes: exit 1, one message on every rank (2 ranks print it twice, identically).
bad() {  # bad NAME EXPECTED-SUBSTRING SFT-FLAGS...
  local name=$1 expected=$2
  shift 2
  sft 2 "$WORK/bad-$name" "$WORK/bad-$name.log" "$@"
  local rc=$?
  [ "$rc" -eq 1 ] || fail "$name: exit $rc, want 1"
  local lines
  lines=$(grep "trlhpc: error:" "$WORK/bad-$name.log" | sort -u | wc -l)
  [ "$lines" -eq 1 ] || { fail "$name: $lines different error lines"; grep "error" "$WORK/bad-$name.log" | head -4; }
  grep -q -- "$expected" "$WORK/bad-$name.log" || { fail "$name: no '$expected'"; tail -3 "$WORK/bad-$name.log"; }
}
cp -r "$WORK/full/checkpoint-3" "$WORK/future"
python3 - "$WORK/future/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["format_version"] = 99; json.dump(m, open(sys.argv[1], "w"))
PY
bad future "format version 99" --resume_from_checkpoint "$WORK/future"
cp -r "$WORK/full/checkpoint-3" "$WORK/partial"
rm "$WORK/partial/manifest.json"
bad partial "has no manifest.json" --resume_from_checkpoint "$WORK/partial"
mkdir -p "$WORK/tok"
cp examples/tiny-chat/tokenizer_config.json "$WORK/tok/"
python3 - examples/tiny-chat/tokenizer.json "$WORK/tok/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1])); t.setdefault("added_tokens", [])
json.dump(t, open(sys.argv[2], "w"), indent=1)   # same vocabulary, other bytes: another tokenizer file
PY
bad tokenizer "another tokenizer" --resume_from_checkpoint "$WORK/full/checkpoint-3" --tokenizer "$WORK/tok"
bad batch "another global batch" --resume_from_checkpoint "$WORK/full/checkpoint-3" --per_device_train_batch_size 1
cp -r "$WORK/full/checkpoint-3" "$WORK/flipped"
python3 - "$WORK/flipped/state.h5" <<'PY'
import sys
# Flip one byte in the middle of the file: the raw data of some dataset (the metadata is at the start).
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0x10; open(p, "wb").write(b)
PY
bad flipped "does not match its checksum" --resume_from_checkpoint "$WORK/flipped"
grep -q "tensor [a-z_]*/model\.[^ ]* (in dataset [a-z_]*/unit-[0-9]*)" "$WORK/bad-flipped.log" ||
  fail "flipped: the error does not name the tensor and its dataset"

# 6. kill -9 of one rank during a save. A model large enough that writing its checkpoint takes a
# while (about 100 MB): the watcher kills a rank as soon as checkpoint-2.tmp/state.h5 appears.
python3 - "$WORK/big.json" <<'PY'
import json, sys
c = json.load(open("examples/tiny-chat/config.json"))
c.update(hidden_size=512, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2)
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
big() {  # big OUT LOG FLAGS...
  local out=$1 log=$2
  shift 2
  trlhpc_np 600 2 sft --config examples/tiny-chat/sft.yaml --model_config "$WORK/big.json" \
    --max_steps 3 --max_length 128 --logging_steps 1 --eval_dataset "" --peak_flops 1e12 --output_dir "$out" "$@" >"$log" 2>&1
}
big "$WORK/big-full" "$WORK/big-full.log" || fail "big uninterrupted run: exit $?"
kill_during_save() {  # kill_during_save NAME FLAGS...
  local name=$1
  shift
  big "$WORK/$name" "$WORK/$name.log" --save_steps 1 "$@" &
  local runner=$!
  python3 - "$WORK/$name/checkpoint-2.tmp/state.h5" "$TRLHPC" "$WORK/$name" <<'PY'
import os, re, signal, subprocess, sys, time
target, binary, out = sys.argv[1], sys.argv[2], sys.argv[3]
deadline = time.time() + 300
while time.time() < deadline:
    if os.path.exists(target):
        # this run's ranks: command lines that start with the binary (mpirun's and timeout's do not) and
        # name this output dir (another run of the same binary on the machine is not this test's)
        pattern = "^" + re.escape(binary) + " sft .*--output_dir " + re.escape(out) + "( |$)"
        pids = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
        if pids:
            os.kill(int(pids[-1]), signal.SIGKILL)
            print(f"    killed rank pid {pids[-1]} while {target} was being written")
            sys.exit(0)
    time.sleep(0.002)
print("    the save never started"); sys.exit(1)
PY
  [ $? -eq 0 ] || fail "$name: no save to interrupt"
  wait $runner && fail "$name: the killed job exited 0"
  [ -f "$WORK/$name/checkpoint-1/manifest.json" ] || fail "$name: checkpoint-1 damaged"
  [ "$(cat "$WORK/$name/latest")" = "checkpoint-1" ] || [ -f "$WORK/$name/checkpoint-2/manifest.json" ] ||
    fail "$name: latest ($(cat "$WORK/$name/latest")) names an incomplete checkpoint"
  big "$WORK/$name" "$WORK/$name-resumed.log" --save_steps 1 --resume_from_checkpoint latest "$@" || {
    fail "$name: resume after kill: exit $?"
    tail -5 "$WORK/$name-resumed.log"
  }
  compare "$WORK/big-full" "$WORK/$name" 0 || fail "$name: resumed losses differ from the uninterrupted run"
}
echo "kill -9 during a save, resumed from latest"
kill_during_save big

# 7. --async_save: what is written does not depend on when it is written.
echo "--async_save: checkpoints, metrics and model equal the synchronous run's"
sft 2 "$WORK/async" "$WORK/async.log" --save_steps 3 --async_save || fail "async run: exit $?"
for s in 3 6 9; do
  python3 - "$WORK/full/checkpoint-$s/manifest.json" "$WORK/async/checkpoint-$s/manifest.json" <<'PY' ||
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for m in (a, b): m.pop("run")  # the options, --async_save among them
assert a == b, "manifests differ"
PY
    fail "async: checkpoint-$s differs from the synchronous one"
done
[ "$(cat "$WORK/async/latest" 2>/dev/null)" = "checkpoint-9" ] || fail "async: latest is not checkpoint-9"
[ "$(grep -c 'checkpoint saved' "$WORK/async.log")" -eq 3 ] || fail "async: not one 'checkpoint saved' line per save"
compare "$WORK/full" "$WORK/async" 0 || fail "async: metrics differ from the synchronous run"
cmp -s "$WORK/full/model.safetensors" "$WORK/async/model.safetensors" || fail "async: final model differs"
echo "resumed from an asynchronous checkpoint"
FROM=async resume async-same 2 --save_steps 3 --async_save
compare "$WORK/full" "$WORK/async-same" 0 || fail "resume from an async checkpoint: not bit-identical"
echo "kill -9 during a background save, resumed from latest"
kill_during_save big-async --async_save

e2e_end
