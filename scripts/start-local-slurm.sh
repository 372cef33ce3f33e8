#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, for trying `srun`/`sbatch` locally and for CI.
# Run as root: installs slurm-wlm + munge (Debian), writes /etc/slurm/slurm.conf for this host, creates a
# munge key if missing, starts munged, slurmctld and slurmd directly (no systemd) and waits until
# `sinfo` shows the node idle. Idempotent: a second run finds the daemons up and only re-checks.
# Exit 0 when the node is idle; otherwise a message on stderr and a non-zero exit.
set -euo pipefail

die() { echo "start-local-slurm: $*" >&2; exit 1; }
say() { echo "start-local-slurm: $*"; }

[[ $(id -u) -eq 0 ]] || die "must run as root (installs packages, writes /etc/slurm, starts daemons)"

HOST=$(hostname -s)
CONF=/etc/slurm/slurm.conf
WAIT_S=${SLURM_START_TIMEOUT:-60}

# 1. Packages.
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null \
   || ! command -v srun >/dev/null; then
  command -v apt-get >/dev/null || die "slurm-wlm/munge are missing and apt-get is not available"
  say "installing slurm-wlm and munge"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || die "apt-get update failed"
  apt-get install -y -qq slurm-wlm munge >/dev/null || die "apt-get install slurm-wlm munge failed"
fi

# 2. Configuration (rewritten only when it changes, so running daemons keep a consistent view).
# A slurm.conf this script did not write belongs to the site: leave it and its daemons alone.
MARK="# Written by trlhpc scripts/start-local-slurm.sh"
if [[ -f $CONF ]] && ! head -n1 "$CONF" | grep -qF "$MARK"; then
  if sinfo -h -t idle -o '%n' 2>/dev/null | grep -q .; then
    say "keeping the existing $CONF (not written by this script); an idle node is up"; exit 0
  fi
  die "$CONF exists and was not written by this script; not touching it (and no node is idle)"
fi
CPUS=$(nproc)
AVAIL_MB=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
REAL_MB=$(( AVAIL_MB * 9 / 10 ))
(( REAL_MB >= 256 )) || REAL_MB=256
MPI_DEFAULT=none
PLUGIN_DIR=$(dirname "$(find /usr/lib -name 'mpi_pmix*.so' -path '*slurm*' 2>/dev/null | head -n1)" 2>/dev/null || true)
[[ -n $PLUGIN_DIR && -e $PLUGIN_DIR/mpi_pmix.so ]] && MPI_DEFAULT=pmix

mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm
NEW=$(mktemp)
cat >"$NEW" <<EOF
$MARK: a single-node cluster on $HOST.
ClusterName=local
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=$MPI_DEFAULT
ReturnToService=2
SlurmdTimeout=300
InactiveLimit=0
KillWait=10
NodeName=$HOST CPUs=$CPUS RealMemory=$REAL_MB State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
CHANGED=0
if ! cmp -s "$NEW" "$CONF" 2>/dev/null; then
  # RealMemory moves with free memory: keep an existing file whose only difference is that line.
  if [[ -f $CONF ]] && diff <(grep -v '^NodeName=' "$NEW") <(grep -v '^NodeName=' "$CONF") >/dev/null \
     && grep -q "^NodeName=$HOST CPUs=$CPUS " "$CONF"; then
    :
  else
    install -m 644 "$NEW" "$CONF"
    CHANGED=1
  fi
fi
rm -f "$NEW"

# 3. munge.
if [[ ! -s /etc/munge/munge.key ]]; then
  say "creating /etc/munge/munge.key"
  if command -v mungekey >/dev/null; then mungekey --create --force >/dev/null
  else dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none; fi
fi
chown munge:munge /etc/munge/munge.key 2>/dev/null || true
chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  say "starting munged"
  if id munge >/dev/null 2>&1; then
    su -s /bin/sh munge -c "/usr/sbin/munged --force" 2>/dev/null || /usr/sbin/munged --force
  else
    /usr/sbin/munged --force
  fi
  for _ in $(seq 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
  munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || die "munged does not answer (see /var/log/munge/munged.log)"
fi

# 4. slurmctld and slurmd (restarted when the configuration changed).
running() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
stop() { if running "$1"; then kill "$(cat "$1")"; for _ in $(seq 20); do running "$1" || break; sleep 0.5; done; fi; }
if (( CHANGED )); then stop /run/slurm/slurmd.pid; stop /run/slurm/slurmctld.pid; fi
if ! running /run/slurm/slurmctld.pid; then
  say "starting slurmctld"
  /usr/sbin/slurmctld -i || die "slurmctld failed to start (see /var/log/slurm/slurmctld.log)"
fi
if ! running /run/slurm/slurmd.pid; then
  say "starting slurmd"
  /usr/sbin/slurmd || die "slurmd failed to start (see /var/log/slurm/slurmd.log)"
fi

# 5. Wait for the node to be idle.
deadline=$(( SECONDS + WAIT_S ))
state=""
while (( SECONDS < deadline )); do
  state=$(sinfo -h -n "$HOST" -o '%t' 2>/dev/null | head -n1 || true)
  case $state in
    idle|mix|alloc) say "node $HOST is $state (MpiDefault=$MPI_DEFAULT, $CPUS CPUs)"; exit 0 ;;
    down*|drain*|drng*|fail*) scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  sleep 1
done
die "node $HOST not idle after ${WAIT_S}s (state: '${state:-no answer}'); see /var/log/slurm/slurmctld.log and slurmd.log"
