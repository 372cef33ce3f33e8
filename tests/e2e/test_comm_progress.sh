#!/usr/bin/env bash
# `trlhpc sft --comm_progress thread` (the default) and `--comm_progress none` on the bundled tiny-chat job
# (2 ranks, DDP and ZeRO-3) log bitwise the same losses, gradient norms and eval losses: the progress thread
# changes only when MPI's operations advance, never what they compute. Neither run warns about a fallback
# (the MPI here provides MPI_THREAD_MULTIPLE), and a misspelt mode is refused naming the flag.
set -u
TRLHPC=$1
MPIRUN=${2:-mpirun}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$ROOT"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

run() {  # run NAME FLAGS...: one 2-rank run, log in $WORK/NAME.log, metrics in $WORK/NAME/metrics.jsonl
  local name=$1
  shift
  OMP_NUM_THREADS=1 timeout 300 "$MPIRUN" --oversubscribe -np 2 "$TRLHPC" sft --config examples/tiny-chat/sft.yaml \
    --max_steps 6 --logging_steps 1 --eval_steps 3 --output_dir "$WORK/$name" "$@" >"$WORK/$name.log" 2>&1
  local rc=$?
  if [ "$rc" -ne 0 ]; then fail "$name: exit $rc"; sed 's/^/    /' "$WORK/$name.log" | tail -20; fi
}

same_numbers() {  # same_numbers A B: the same loss / grad_norm / eval_loss values, as logged (bitwise)
  python3 - "$WORK/$1/metrics.jsonl" "$WORK/$2/metrics.jsonl" <<'PY'
import json, sys
def numbers(p):
    out = []
    for line in open(p):
        r = json.loads(line)
        out += [(k, r["step"], repr(r[k])) for k in ("loss", "grad_norm", "eval_loss") if k in r]
    return out
a, b = numbers(sys.argv[1]), numbers(sys.argv[2])
assert a, "no losses logged"
assert a == b, [(x, y) for x, y in zip(a, b) if x != y][:5]
print(f"    {len(a)} values identical")
PY
}

for sharding in none zero3; do
  run "$sharding.none" --sharding "$sharding" --comm_progress none
  run "$sharding.thread" --sharding "$sharding"  # the default: thread
  if [ ! -f "$WORK/$sharding.none/metrics.jsonl" ] || [ ! -f "$WORK/$sharding.thread/metrics.jsonl" ]; then
    fail "$sharding: a run wrote no metrics.jsonl"
    continue
  fi
  grep -q "comm_progress" "$WORK/$sharding.thread.log" && fail "$sharding: unexpected --comm_progress warning: $(grep comm_progress "$WORK/$sharding.thread.log")"
  echo "$sharding: --comm_progress none vs thread"
  same_numbers "$sharding.none" "$sharding.thread" || fail "$sharding: numbers differ"
done

OMP_NUM_THREADS=1 timeout 120 "$MPIRUN" --oversubscribe -np 2 "$TRLHPC" sft --config examples/tiny-chat/sft.yaml \
  --max_steps 1 --output_dir "$WORK/bad" --comm_progress always >"$WORK/bad.log" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "--comm_progress always: exit $rc, want 1"
grep -q -- "--comm_progress always" "$WORK/bad.log" || fail "--comm_progress always: the error does not name the flag"

[ "$failures" -eq 0 ] && echo "PASS" || exit 1
