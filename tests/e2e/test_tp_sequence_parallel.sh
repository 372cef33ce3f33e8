#!/usr/bin/env bash
# `trlhpc sft --tp_size 2 --tp_sequence_parallel` on the bundled tiny-chat job (2 ranks, real tokenizer,
# chat template, packing) trains to the losses of --tp_size 2 without it: packed rows, padding-free rows
# (one row of all the micro-batch's tokens, padded by the job to a multiple of tp, 2 micro-batches per
# step) and eval. The mesh line names the mode. Bound: 1e-5 relative per logged loss (fp32 summation order only; measured
# differences are printed).
set -u
TRLHPC=$1
MPIRUN=${2:-mpirun}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

run() {  # run NAME FLAGS...: one 2-rank tp 2 run, log in $WORK/NAME.log, metrics in $WORK/NAME/metrics.jsonl
  local name=$1
  shift
  OMP_NUM_THREADS=1 timeout 300 "$MPIRUN" --oversubscribe -np 2 "$TRLHPC" sft --config examples/tiny-chat/sft.yaml \
    --tp_size 2 --max_steps 6 --logging_steps 1 --eval_steps 3 --output_dir "$WORK/$name" "$@" >"$WORK/$name.log" 2>&1
  local rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name: exit $rc"; sed 's/^/    /' "$WORK/$name.log" | tail -20; fi
}

close_losses() {  # close_losses A B: same steps, every loss / eval_loss within 1e-5 relative
  python3 - "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" <<'PY'
import json, sys
def losses(p):
    out = []
    for line in open(p):
        r = json.loads(line)
        out += [(k, r["step"], r[k]) for k in ("loss", "eval_loss") if k in r]
    return out
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert a and [x[:2] for x in a] == [x[:2] for x in b], (a, b)
worst = max(abs(x[2] - y[2]) / abs(y[2]) for x, y in zip(a, b))
print(f"    {len(a)} losses, worst relative difference {worst:.3g}")
assert worst <= 1e-5, worst
PY
}

# padding_free also accumulates 2 micro-batches per step (the norm gradients, summed over tp for each
# micro-batch, must not be summed again).
for mode in packed padding_free; do
  extra=()
  [ "$mode" = padding_free ] && extra=(--padding_free --gradient_accumulation_steps 2)
  run "$mode" "${extra[@]}"
  run "$mode.sp" "${extra[@]}" --tp_sequence_parallel
  if [ ! -f "$WORK/$mode/metrics.jsonl" ] || [ ! -f "$WORK/$mode.sp/metrics.jsonl" ]; then
    fail "$mode: a run wrote no metrics.jsonl"
    continue
  fi
  grep -q "tp 2 (sequence parallel)" "$WORK/$mode.sp.log" || fail "$mode: the mesh line does not name sequence parallel"
  echo "$mode: tp 2 vs tp 2 + --tp_sequence_parallel"
  close_losses "$mode" "$mode.sp" || fail "$mode: losses differ"
done

[ "$failures" -eq 0 ] && echo "PASS" || exit 1
