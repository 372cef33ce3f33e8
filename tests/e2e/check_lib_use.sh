#!/usr/bin/env bash
# unit.test_e2e_scripts_use_lib: every tests/e2e/test_*.sh starts and ends through tests/e2e/lib.sh, so that
# checks count, fail, skip (exit 77, CTest's skip code) and clean up alike everywhere:
#  - it sources lib.sh and calls e2e_begin "$@" (TRLHPC/MPIRUN as CTest passes them);
#  - it ends through e2e_end (directly, or lora_lib.sh's finish, which calls it) and skips through skip;
#  - neither it nor a helper it sources (lora_lib.sh, trl_curves_lib.sh, two_node_cluster.sh) defines its
#    own fail / fatal / skip / check or a failures counter: those are lib.sh's.
# Usage: check_lib_use.sh [DIR] (default: the folder of this script). Before checking DIR it checks a
# folder of deliberately wrong scripts and fails unless each of them is reported (the check can fail).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${1:-$HERE}

problems() {  # problems DIR: one line per script that breaks a rule; none when all keep them
  local dir=$1 f name
  for f in "$dir"/test_*.sh; do
    name=${f##*/}
    grep -q '^source "$(dirname "$0")/lib.sh"' "$f" || echo "$name: does not source lib.sh (source \"\$(dirname \"\$0\")/lib.sh\")"
    grep -q '^e2e_begin "$@"' "$f" || echo "$name: does not call e2e_begin \"\$@\""
    grep -Eq '(^|[;&|] *)(e2e_end|finish)\b' "$f" || echo "$name: does not end through e2e_end"
    grep -Eq '^[^#]*exit 77' "$f" && echo "$name: exits 77 itself (skip \"REASON\" prints SKIPPED: and exits 77)"
  done
  for f in "$dir"/test_*.sh "$dir"/lora_lib.sh "$dir"/trl_curves_lib.sh "$dir"/two_node_cluster.sh; do
    [ -f "$f" ] || continue
    grep -Eq '^ *(fail|fail_log|fatal|skip|check) *\(\)|^ *failures=0' "$f" &&
      echo "${f##*/}: defines its own fail/fatal/skip/check or failures counter (use lib.sh's)"
  done
}

# The negative control: scripts that each break one rule.
BAD=$(mktemp -d)
trap 'rm -rf "$BAD"' EXIT
printf '%s\n' '#!/usr/bin/env bash' 'TRLHPC=$1' 'echo PASS' >"$BAD/test_no_lib.sh"
printf '%s\n' '#!/usr/bin/env bash' 'source "$(dirname "$0")/lib.sh"' 'e2e_begin "$@"' 'echo done' >"$BAD/test_no_end.sh"
printf '%s\n' '#!/usr/bin/env bash' 'source "$(dirname "$0")/lib.sh"' 'e2e_begin "$@"' \
  'fail() { echo "FAIL $*"; failures=$((failures + 1)); }' 'e2e_end' >"$BAD/test_own_fail.sh"
printf '%s\n' '#!/usr/bin/env bash' 'source "$(dirname "$0")/lib.sh"' 'e2e_begin "$@"' \
  'command -v gnuplot || { echo "SKIP: no gnuplot"; exit 77; }' 'e2e_end' >"$BAD/test_own_skip.sh"
control=$(problems "$BAD")
for want in "test_no_lib.sh: does not source" "test_no_lib.sh: does not call e2e_begin" "test_no_end.sh: does not end" \
            "test_own_fail.sh: defines its own" "test_own_skip.sh: exits 77 itself"; do
  grep -qF "$want" <<<"$control" || { echo "FAIL the negative control is not reported: $want"; echo "$control"; exit 1; }
done

found=$(problems "$DIR")
if [ -n "$found" ]; then
  echo "$found"
  echo "FAIL $(wc -l <<<"$found") problem(s) in $DIR (tests/e2e/lib.sh says what it provides)"
  exit 1
fi
echo "ok: $(ls "$DIR"/test_*.sh | wc -l) e2e scripts start with e2e_begin and end with e2e_end of lib.sh"
