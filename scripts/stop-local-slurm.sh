#!/usr/bin/env bash
# Stops the local SLURM cluster of scripts/start-local-slurm.sh (one node or several) and removes what it
# made: the daemons by pid (those recorded in /run/trlhpc-local-slurm/pids and the slurmctld/slurmd pid
# files of /run/slurm), whatever still runs inside the nodes' network namespaces (job steps), the
# namespaces, the bridge, and the state dir. /etc/slurm/slurm.conf and the munge key stay.
#   scripts/stop-local-slurm.sh [--keep-munge]   (--keep-munge: leave munged running; the start script
#                                                 uses it when it switches between cluster sizes)
# Safe to run when nothing is up. Exit 0 unless a daemon refuses to stop.
set -uo pipefail

STATE=/run/trlhpc-local-slurm
BRIDGE=trlhpc-br0
KEEP_MUNGE=0
[[ ${1:-} == --keep-munge ]] && KEEP_MUNGE=1
say() { echo "stop-local-slurm: $*"; }
[[ $(id -u) -eq 0 ]] || { echo "stop-local-slurm: must run as root" >&2; exit 1; }

# A recorded pid may have been reused by an unrelated process since: only stop it if it still runs the
# program that was recorded (comm is at most 15 characters, so compare its prefix).
alive_as() {  # PID PROGRAM
  local comm
  comm=$(cat "/proc/$1/comm" 2>/dev/null) || return 1
  [[ ${2:0:15} == "$comm" ]]
}
stop_pid() {  # WHAT PID PROGRAM
  alive_as "$2" "$3" || return 0
  say "stopping $1 (pid $2)"
  kill "$2" 2>/dev/null
  for _ in $(seq 40); do alive_as "$2" "$3" || return 0; sleep 0.25; done
  kill -9 "$2" 2>/dev/null
  sleep 0.5
  ! alive_as "$2" "$3" || { say "pid $2 ($1) does not stop"; return 1; }
}

rc=0
# Recorded daemons named like $1 (a regex on the name column), as "NAME PID" lines.
recorded() { [[ -f $STATE/pids ]] && awk -v re="$1" '$1 ~ re {print $1, $2}' "$STATE/pids"; }

# slurmd first, then slurmctld, then munged (each needs the next to shut down cleanly).
while read -r what pid; do stop_pid "$what" "$pid" slurmd || rc=1; done < <(recorded '^slurmd')
# Daemons started before pids were recorded (or whose record was lost): their pid files.
for pidfile in /run/slurm/slurmd*.pid; do
  [[ -f $pidfile ]] && { stop_pid "$(basename "$pidfile" .pid)" "$(cat "$pidfile")" slurmd || rc=1; rm -f "$pidfile"; }
done
# Job steps left on the nodes (slurmstepd and the ranks it started), then the namespaces themselves.
for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^trlhpc-n[0-9]+$/ {print $1}'); do
  pids=$(ip netns pids "$ns" 2>/dev/null)
  if [[ -n $pids ]]; then
    say "stopping what still runs on $ns: $(echo $pids)"
    kill $pids 2>/dev/null; sleep 1; kill -9 $(ip netns pids "$ns" 2>/dev/null) 2>/dev/null
  fi
  ip netns delete "$ns" && say "removed network namespace $ns"
done
for uts in "$STATE"/uts/*; do
  [[ -e $uts ]] || continue
  umount "$uts" 2>/dev/null; rm -f "$uts"
done
ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE" && say "removed bridge $BRIDGE"
while read -r what pid; do stop_pid "$what" "$pid" slurmctld || rc=1; done < <(recorded '^slurmctld$')
[[ -f /run/slurm/slurmctld.pid ]] && { stop_pid slurmctld "$(cat /run/slurm/slurmctld.pid)" slurmctld || rc=1; rm -f /run/slurm/slurmctld.pid; }
if [[ $KEEP_MUNGE == 0 ]]; then
  while read -r what pid; do stop_pid "$what" "$pid" munged || rc=1; done < <(recorded '^munged$')
fi
if [[ $KEEP_MUNGE == 1 && -f $STATE/pids ]]; then
  grep '^munged ' "$STATE/pids" >"$STATE/pids.keep" || true
  rm -rf "$STATE/uts" "$STATE/nodes" "$STATE/subnet" "$STATE/pids"
  [[ -s $STATE/pids.keep ]] && mv "$STATE/pids.keep" "$STATE/pids" || rm -f "$STATE/pids.keep"
else
  rm -rf "$STATE"
fi
exit $rc
