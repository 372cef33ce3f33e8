# The common start and end of the e2e scripts that count checks (source it; bash, set -u):
#   e2e_begin "$@"   TRLHPC=$1 (made absolute), MPIRUN=${2:-mpirun}, ROOT (the checkout), WORK (a temporary
#                    folder removed at exit), the working directory ROOT, OMP_NUM_THREADS=1, passed=failed=0
#   check NAME RC    counts RC (0 = pass); a failure prints "FAIL NAME" and the script goes on
#   e2e_end          prints the counts; the script's status is 0 only when nothing failed
e2e_begin() {
  TRLHPC=$(realpath "$1")
  MPIRUN=${2:-mpirun}
  ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  cd "$ROOT" || exit 1
  export OMP_NUM_THREADS=1
  passed=0 failed=0
}

check() {
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1"; fi
}

e2e_end() {
  echo "passed $passed failed $failed"
  [ "$failed" -eq 0 ]
}
