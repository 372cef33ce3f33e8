#!/usr/bin/env bash
# Checkpoints of format 1 (a dataset per tensor and kind, written by trlhpc before format 2's dataset per
# unit and kind) still resume and export: tests/fixtures/checkpoint_v1 was written by the old binary
# (tests/fixtures/make_checkpoint_v1_fixture.sh), so nothing here is produced by the code under test.
#  1. Resumed on the layout it was saved on (2 ranks DDP): steps 3-4 and the eval at 4 are bit-identical
#     to what the old binary logged when it went on from that checkpoint; the new checkpoint-4 is
#     format 2 and resumes in turn.
#  2. Resumed on another layout (2 ranks, tp 2): within 1e-5 relative (fp32 summation order).
#  3. `trlhpc export` of it on 1 and 2 ranks: byte for byte the old binary's export.
#  4. A format-2 index that is missing or damaged in manifest.json: exit 1 on every rank with one
#     message naming the manifest file.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
FIXTURE=$ROOT/tests/fixtures/checkpoint_v1

# --per_device_eval_batch_size 2: the fixture's binary evaluated in batches of the train batch (2); eval
# entropy is a mean over eval batches, so it follows the eval batch size (TRL's default is 8).
sft() {  # sft NP OUT LOG FLAGS...: the fixture's run (its model, 4 steps, a checkpoint and an eval every 2)
  local np=$1 out=$2 log=$3
  shift 3
  trlhpc_np 300 "$np" sft --config examples/tiny-chat/sft.yaml \
    --model_config "$FIXTURE/model_config.json" --max_steps 4 --save_steps 2 --logging_steps 1 --eval_steps 2 \
    --peak_flops 1e12 --per_device_eval_batch_size 2 --output_dir "$out" "$@" >"$log" 2>&1
}

compare() {  # compare EXPECTED.jsonl GOT.jsonl BOUND: every step GOT logged, as EXPECTED logged it
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
def rows(p):
    return {(r["step"], "eval_loss" in r): r for r in map(json.loads, open(p))}
want, got, bound = rows(sys.argv[1]), rows(sys.argv[2]), float(sys.argv[3])
assert set(got) == {(3, False), (4, False), (4, True)}, sorted(got)
worst = 0.0
for key, r in got.items():
    for k in ("loss", "grad_norm", "learning_rate", "eval_loss", "num_tokens", "entropy", "eval_entropy"):
        if k in r:
            x, y = r[k], want[key][k]
            worst = max(worst, abs(x - y) / abs(y) if y else abs(x))
print(f"    {len(got)} lines, worst relative difference {worst:.3g}")
assert worst <= bound, worst
PY
}

resume() {  # resume NAME NP FLAGS...: a copy of the fixture's checkpoint-2, resumed from latest
  local name=$1 np=$2
  shift 2
  mkdir -p "$WORK/$name"
  cp -r "$FIXTURE/checkpoint-2" "$WORK/$name/"
  sft "$np" "$WORK/$name" "$WORK/$name.log" --resume_from_checkpoint latest "$@" || {
    fail "$name: exit $?"
    tail -5 "$WORK/$name.log"
  }
}

echo "1. format 1, the layout it was saved on (2 ranks DDP)"
resume same 2
grep -q "resumed from .*checkpoint-2 after step 2" "$WORK/same.log" || fail "same: no resume line"
compare "$FIXTURE/metrics.jsonl" "$WORK/same/metrics.jsonl" 0 || fail "same layout: not bit-identical to the old binary"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["format_version"] == 2' \
  "$WORK/same/checkpoint-4/manifest.json" || fail "the checkpoint saved after the resume is not format 2"
mkdir -p "$WORK/again"
cp -r "$WORK/same/checkpoint-4" "$WORK/again/"
sft 2 "$WORK/again" "$WORK/again.log" --max_steps 5 --resume_from_checkpoint latest || fail "resume of the format-2 checkpoint: exit $?"

echo "2. format 1, another layout (2 ranks, tp 2)"
resume tp 2 --tp_size 2 --per_device_train_batch_size 4
compare "$FIXTURE/metrics.jsonl" "$WORK/tp/metrics.jsonl" 1e-5 || fail "tp 2: losses differ"

echo "3. export of format 1"
for np in 1 2; do
  trlhpc_np 120 $np export "$FIXTURE/checkpoint-2" --output_dir "$WORK/export$np" \
    >"$WORK/export$np.log" 2>&1 || { fail "export on $np ranks: exit $?"; tail -3 "$WORK/export$np.log"; }
  cmp -s "$FIXTURE/export-checkpoint-2.safetensors" "$WORK/export$np/model.safetensors" ||
    fail "export on $np ranks differs from the old binary's"
done

echo "4. a damaged format-2 index"
damaged() {  # damaged NAME EXPECTED PYTHON-EDIT-OF-m
  local name=$1 expected=$2 edit=$3
  mkdir -p "$WORK/bad-$name"
  cp -r "$WORK/same/checkpoint-4" "$WORK/bad-$name/"
  python3 - "$WORK/bad-$name/checkpoint-4/manifest.json" "$edit" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); exec(sys.argv[2]); json.dump(m, open(sys.argv[1], "w"))
PY
  sft 2 "$WORK/bad-$name" "$WORK/bad-$name.log" --resume_from_checkpoint latest
  local rc=$?
  [ "$rc" -eq 1 ] || fail "$name: exit $rc, want 1"
  local lines
  lines=$(grep "trlhpc: error:" "$WORK/bad-$name.log" | sort -u | wc -l)
  [ "$lines" -eq 1 ] || { fail "$name: $lines different error lines"; grep error "$WORK/bad-$name.log" | head -4; }
  grep -qF -- "$WORK/bad-$name/checkpoint-4/manifest.json $expected" "$WORK/bad-$name.log" ||
    { fail "$name: no '$expected' naming the manifest"; tail -3 "$WORK/bad-$name.log"; }
}
damaged missing 'has no tensor index' 'del m["tensors"]'
damaged offset 'tensor index entry "model.norm.weight" ends at element' \
  'm["tensors"]["model.norm.weight"]["offset"] = m["datasets"]["params/" + m["tensors"]["model.norm.weight"]["unit"]]["shape"][0]'
damaged overlap 'tensor index: two tensors of unit-1 overlap' \
  'm["tensors"]["model.layers.0.mlp.up_proj.weight"]["offset"] = m["tensors"]["model.layers.0.mlp.gate_proj.weight"]["offset"]'

e2e_end
