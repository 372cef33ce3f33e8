#!/usr/bin/env bash
# Hang watchdog end to end (collective_watchdog.hpp), with tests/e2e/watchdog_probe on 4 ranks:
#   stop:  one rank SIGSTOPs itself before the all_reduce of step 3, timeout 20 s: mpirun exits 2 within
#          60 s, the output names the collective, the group, the phase and the stopped rank, and no probe
#          process is left (a stopped process ignores SIGTERM; mpirun's abort must still end it);
#   sleep: one rank sleeps 3 s before the all_reduce of step 3, timeout 10 s: exit 0, no timeout report.
# Usage: test_watchdog.sh TRLHPC [MPIRUN]; the probe is $TRLHPC_WATCHDOG_PROBE (set by tests/CMakeLists.txt)
# or <dir of TRLHPC>/tests/watchdog_probe. Every run is bounded by `timeout`.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
PROBE=${TRLHPC_WATCHDOG_PROBE:-$(dirname "$TRLHPC")/tests/watchdog_probe}
[ -x "$PROBE" ] || fatal "probe $PROBE not built"
TAG="wd$$"

leftovers() { pgrep -f -- "--tag $TAG" || true; }
cleanup() {
  for pid in $(leftovers); do kill -KILL "$pid" 2>/dev/null; done  # by id, only our tagged processes
  rm -rf "$WORK"
}
trap cleanup EXIT

# --- stop: a SIGSTOPped rank ends the job ------------------------------------------------------------
log="$WORK/stop.log"
start=$(date +%s)
timeout -s KILL 120 "$MPIRUN" --oversubscribe --bind-to none -np 4 "$PROBE" --timeout 20 --victim 2 --mode stop \
  --iterations 100000 --tag "$TAG" >"$log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
sleep 1
left=$(leftovers)
pattern='trlhpc: failure: \[rank [013] @ [^]]*\] collective timeout: all_reduce \(#[0-9]+ on this communicator\) in group tp \(world ranks \[0,1,2,3\]\) during step 3: waited 2[0-9]\.[0-9] s \(--ddp_timeout 20\); not arrived: world ranks \[2\]; aborting the job'
if [ "$rc" -ne 2 ]; then
  fail_log "stop: mpirun exited $rc (want 2) after ${elapsed}s" "$log" 30
elif [ "$elapsed" -gt 60 ]; then
  fail_log "stop: took ${elapsed}s (want <= 60)" "$log" 30
elif ! grep -Eq "$pattern" "$log"; then
  fail_log "stop: no report naming all_reduce, group tp, step 3 and world rank 2" "$log" 30
elif [ -n "$left" ]; then
  fail_log "stop: processes left after the abort: $left" "$log" 30
else
  echo "ok   stop: exit 2 after ${elapsed}s, nothing left; $(grep -Em1 "$pattern" "$log")"
fi

# --- sleep: slow but alive is not a hang ---------------------------------------------------------------
log="$WORK/sleep.log"
start=$(date +%s)
timeout -s KILL 120 "$MPIRUN" --oversubscribe --bind-to none -np 4 "$PROBE" --timeout 10 --victim 1 --mode sleep \
  --sleep 3 --iterations 20 --tag "$TAG" >"$log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
if [ "$rc" -ne 0 ] || ! grep -q "watchdog_probe: ok" "$log" || grep -q "collective timeout" "$log"; then
  fail_log "sleep: exit $rc after ${elapsed}s (want 0, 'watchdog_probe: ok', no timeout report)" "$log" 30
elif [ "$elapsed" -lt 3 ]; then
  fail_log "sleep: finished in ${elapsed}s, so the victim did not sleep" "$log" 30
else
  echo "ok   sleep: a rank 3 s late under a 10 s timeout finished normally in ${elapsed}s"
fi

e2e_end
