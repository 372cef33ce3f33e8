# The common start and end of every e2e script (source it; bash, set -u; tests/unit/test_e2e_scripts.sh
# fails when a tests/e2e/test_*.sh does not):
#   e2e_begin "$@"   TRLHPC=$1 (made absolute), MPIRUN=${2:-mpirun}, ROOT (the checkout), WORK (a temporary
#                    folder removed at exit; a script that cleans up more sets its own EXIT trap after this,
#                    still removing "$WORK"), the working directory ROOT, OMP_NUM_THREADS=1, Open MPI
#                    allowed to run as root when root is running it, passed=failed=0
#   check NAME RC    counts RC (0 = pass); a failure prints "FAIL NAME" and the script goes on
#   fail MSG...      a failed check written as `COND || fail "what is wrong: details"`: counted like
#                    `check MSG 1` (the passes of such checks are not counted), the script goes on
#   fail_log MSG LOG [LINES]   the same, followed by the last LINES (25) lines of LOG, indented
#   fatal MSG...     prints "FAILED: MSG" and exits 1 now: for the checks the rest of a script needs
#   skip MSG...      prints "SKIPPED: MSG" and exits 77, which tests/CMakeLists.txt names as CTest's
#                    SKIP_RETURN_CODE: a peer, tool or resource (SLURM, root, gnuplot) this host lacks
#   e2e_end          prints the counts; the script's status is 0 only when nothing failed
# and, shared by several scripts:
#   trlhpc_np SECONDS NP ARGS...        timeout SECONDS $MPIRUN --oversubscribe -np NP $TRLHPC ARGS...
#   same_metrics A B BOUND KEY...       two metrics.jsonl files log the KEYs at the same steps, in the same
#                                       order, A at least one, each within BOUND relative (0: the same bits)
e2e_begin() {
  TRLHPC=$(realpath "$1")
  MPIRUN=${2:-mpirun}
  ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  cd "$ROOT" || exit 1
  export OMP_NUM_THREADS=1
  if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
  passed=0 failed=0
}

fail() {
  echo "FAIL $*"
  failed=$((failed + 1))
}

fail_log() {
  fail "$1"
  sed 's/^/    /' "$2" | tail -"${3:-25}"
}

check() {
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else fail "$1"; fi
}

fatal() {
  echo "FAILED: $*"
  exit 1
}

skip() {
  echo "SKIPPED: $*"
  exit 77
}

e2e_end() {
  echo "passed $passed failed $failed"
  [ "$failed" -eq 0 ]
}

trlhpc_np() {
  local seconds=$1 np=$2
  shift 2
  timeout "$seconds" "$MPIRUN" --oversubscribe -np "$np" "$TRLHPC" "$@"
}

same_metrics() {
  python3 - "$@" <<'PY'
import json, sys
paths, bound, keys = sys.argv[1:3], float(sys.argv[3]), sys.argv[4:]
def values(path):
    out = []
    for line in open(path):
        row = json.loads(line)
        out += [(k, row["step"], row[k]) for k in keys if k in row]
    return out
a, b = map(values, paths)
assert a, f"{paths[0]}: none of {keys} logged"
assert [x[:2] for x in a] == [y[:2] for y in b], ([x[:2] for x in a], [y[:2] for y in b])
if bound == 0:  # the same bits: equal as numbers and as printed (NaN is never equal; -0.0 is not 0.0)
    differ = [(x, y) for x, y in zip(a, b) if not (x[2] == y[2] and repr(x[2]) == repr(y[2]))]
    assert not differ, differ[:5]
    print(f"    {len(a)} values identical")
else:
    worst = max(abs(x[2] - y[2]) / abs(y[2]) for x, y in zip(a, b))
    print(f"    {len(a)} values, worst relative difference {worst:.3g}")
    assert worst <= bound, worst
PY
}
