#!/usr/bin/env bash
# A SLURM cluster on this machine, for trying `srun`/`sbatch` locally and for CI.
#   scripts/start-local-slurm.sh              one node: this host
#   scripts/start-local-slurm.sh --nodes 2    two nodes trlhpc-n1, trlhpc-n2 on this host
#   scripts/stop-local-slurm.sh               stops all of it again
# Run as root: installs slurm-wlm + munge (Debian), writes /etc/slurm/slurm.conf, creates a munge key if
# missing, starts munged, slurmctld and slurmd directly (no systemd) and waits until `sinfo` shows every
# node idle. Idempotent: a second run with the same --nodes finds the daemons up and only re-checks; a
# run with another --nodes stops the cluster and starts the new one.
#
# With --nodes N >= 2 each node is a network namespace (trlhpc-nK, address 10.87.15.(K+1) unless
# TRLHPC_LOCAL_SUBNET names another /24 prefix) on a bridge (trlhpc-br0, 10.87.15.1) whose traffic stays
# between the host and the nodes (no route out, no forwarding), plus a UTS namespace with the node's own
# hostname: Open MPI tells nodes apart by hostname (two nodes with one hostname crash its shared-memory
# transport). slurmctld runs on the host side, one slurmd per node, each with its own spool dir, pid file,
# log and TmpFS (a shared /tmp breaks PMIx's per-job directory). Each slurmd is entered with nsenter, not
# `ip netns exec` (which remounts /sys and so hides the cgroup mount). scripts/local-node-exec.sh runs
# a command on a node (it is the launch agent `mpirun --hostfile` uses here).
# Every pid this script starts is recorded in /run/trlhpc-local-slurm/pids; the nodes and their
# addresses in /run/trlhpc-local-slurm/nodes, the subnet in /run/trlhpc-local-slurm/subnet.
# Exit 0 when every node is idle; otherwise a message on stderr and a non-zero exit.
set -euo pipefail

die() { echo "start-local-slurm: $*" >&2; exit 1; }
say() { echo "start-local-slurm: $*"; }

NODES=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]?$ ]] || die "--nodes needs a count from 1 to 99"; NODES=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (usage: start-local-slurm.sh [--nodes N])" ;;
  esac
done
[[ $(id -u) -eq 0 ]] || die "must run as root (installs packages, writes /etc/slurm, starts daemons)"

HERE=$(cd "$(dirname "$0")" && pwd)
HOST=$(hostname -s)
CONF=/etc/slurm/slurm.conf
STATE=/run/trlhpc-local-slurm
WAIT_S=${SLURM_START_TIMEOUT:-60}
NET=${TRLHPC_LOCAL_SUBNET:-10.87.15}
BRIDGE=trlhpc-br0
BRIDGE_ADDR=$NET.1

running() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
# A daemon just started writes its pid file a moment later: wait for it (5 s), then record the pid.
record_pid() {  # NAME PIDFILE
  for _ in $(seq 20); do running "$2" && break; sleep 0.25; done
  running "$2" || return 1
  mkdir -p "$STATE"
  echo "$1 $(cat "$2")" >>"$STATE/pids"
}

# 1. Packages.
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null \
   || ! command -v srun >/dev/null; then
  command -v apt-get >/dev/null || die "slurm-wlm/munge are missing and apt-get is not available"
  say "installing slurm-wlm and munge"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || die "apt-get update failed"
  apt-get install -y -qq slurm-wlm munge >/dev/null || die "apt-get install slurm-wlm munge failed"
fi
if (( NODES > 1 )); then
  for tool in ip nsenter unshare; do command -v $tool >/dev/null || die "--nodes $NODES needs '$tool' (iproute2, util-linux)"; done
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
REAL_MB=$(( AVAIL_MB * 9 / 10 / NODES ))
(( REAL_MB >= 256 )) || REAL_MB=256
MPI_DEFAULT=none
PLUGIN_DIR=$(dirname "$(find /usr/lib -name 'mpi_pmix*.so' -path '*slurm*' 2>/dev/null | head -n1)" 2>/dev/null || true)
[[ -n $PLUGIN_DIR && -e $PLUGIN_DIR/mpi_pmix.so ]] && MPI_DEFAULT=pmix

node_name() { echo "trlhpc-n$1"; }
node_addr() { echo "$NET.$(( $1 + 1 ))"; }
if (( NODES == 1 )); then
  NODE_NAMES=("$HOST")
  CTLD_HOST=$HOST
  SLURMD_SPOOL=/var/spool/slurmd
  SLURMD_FILES=slurmd
  NODE_LINES="NodeName=$HOST CPUs=$CPUS RealMemory=$REAL_MB State=UNKNOWN"
  PARTITION_NODES=$HOST
  DESCRIPTION="a single-node cluster on $HOST"
else
  NODE_NAMES=()
  NODE_LINES=""
  for k in $(seq "$NODES"); do
    NODE_NAMES+=("$(node_name "$k")")
    NODE_LINES+="NodeName=$(node_name "$k") NodeAddr=$(node_addr "$k") CPUs=$CPUS RealMemory=$REAL_MB State=UNKNOWN"$'\n'
  done
  NODE_LINES=${NODE_LINES%$'\n'}
  CTLD_HOST="$HOST($BRIDGE_ADDR)"
  SLURMD_SPOOL=/var/spool/slurmd/%n
  SLURMD_FILES=slurmd-%n
  NODE_LINES="TmpFS=/tmp/trlhpc-slurm-%n"$'\n'$NODE_LINES
  PARTITION_NODES="trlhpc-n[1-$NODES]"
  DESCRIPTION="$NODES nodes (network namespaces on bridge $BRIDGE, $NET.0/24) on $HOST"
fi

mkdir -p /etc/slurm /var/spool/slurmctld /var/log/slurm /run/slurm
NEW=$(mktemp)
cat >"$NEW" <<EOF
$MARK: $DESCRIPTION.
ClusterName=local
SlurmctldHost=$CTLD_HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=$SLURMD_SPOOL
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/$SLURMD_FILES.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/$SLURMD_FILES.log
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
$NODE_LINES
PartitionName=debug Nodes=$PARTITION_NODES Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
# RealMemory moves with free memory: keep an existing file whose only difference is that number.
without_memory() { sed 's/ RealMemory=[0-9]*//' "$1"; }
if ! [[ -f $CONF ]] || ! diff <(without_memory "$NEW") <(without_memory "$CONF") >/dev/null; then
  if [[ -f $CONF ]]; then
    say "the cluster changes to $DESCRIPTION: stopping the running one"
    bash "$HERE/stop-local-slurm.sh" --keep-munge
  fi
  install -m 644 "$NEW" "$CONF"
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
  record_pid munged /run/munge/munged.pid || say "munged answers but wrote no /run/munge/munged.pid: not recorded"
fi

# 4. The nodes' namespaces (--nodes >= 2): bridge, one veth pair, network and UTS namespace per node.
if (( NODES > 1 )); then
  mkdir -p "$STATE/uts"
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge || die "cannot create bridge $BRIDGE (needs CAP_NET_ADMIN)"
    ip addr add "$BRIDGE_ADDR/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
  fi
  : >"$STATE/nodes.new"
  for k in $(seq "$NODES"); do
    name=$(node_name "$k"); addr=$(node_addr "$k")
    if [[ ! -e /var/run/netns/$name ]]; then
      ip netns add "$name" || die "cannot create network namespace $name"
      ip link add "trlhpc-v$k" type veth peer name eth0 netns "$name"
      ip link set "trlhpc-v$k" master "$BRIDGE" up
      ip -n "$name" addr add "$addr/24" dev eth0
      ip -n "$name" link set lo up
      ip -n "$name" link set eth0 up
    fi
    if ! findmnt "$STATE/uts/$name" >/dev/null 2>&1; then
      touch "$STATE/uts/$name"
      unshare --uts="$STATE/uts/$name" hostname "$name" || die "cannot create a UTS namespace for $name"
    fi
    mkdir -p "/var/spool/slurmd/$name" "/tmp/trlhpc-slurm-$name"
    echo "$name $addr" >>"$STATE/nodes.new"
  done
  mv "$STATE/nodes.new" "$STATE/nodes"
  echo "$NET.0/24" >"$STATE/subnet"
else
  mkdir -p /var/spool/slurmd
fi

# 5. slurmctld and slurmd (when the configuration changed, step 2 stopped them).
if ! running /run/slurm/slurmctld.pid; then
  say "starting slurmctld"
  /usr/sbin/slurmctld -i || die "slurmctld failed to start (see /var/log/slurm/slurmctld.log)"
  record_pid slurmctld /run/slurm/slurmctld.pid || die "slurmctld exited (see /var/log/slurm/slurmctld.log)"
fi
if (( NODES == 1 )); then
  if ! running /run/slurm/slurmd.pid; then
    say "starting slurmd"
    /usr/sbin/slurmd || die "slurmd failed to start (see /var/log/slurm/slurmd.log)"
    record_pid slurmd /run/slurm/slurmd.pid || die "slurmd exited (see /var/log/slurm/slurmd.log)"
  fi
else
  for name in "${NODE_NAMES[@]}"; do
    pidfile=/run/slurm/slurmd-$name.pid
    running "$pidfile" && continue
    say "starting slurmd of $name"
    nsenter --net="/var/run/netns/$name" --uts="$STATE/uts/$name" /usr/sbin/slurmd -N "$name" \
      || die "slurmd of $name failed to start (see /var/log/slurm/slurmd-$name.log)"
    record_pid "slurmd-$name" "$pidfile" || die "slurmd of $name exited (see /var/log/slurm/slurmd-$name.log)"
  done
fi

# 6. Wait for every node to be idle.
deadline=$(( SECONDS + WAIT_S ))
while (( SECONDS < deadline )); do
  ready=0; states=""
  for name in "${NODE_NAMES[@]}"; do
    state=$(sinfo -h -n "$name" -o '%t' 2>/dev/null | head -n1 || true)
    states+=" $name:${state:-?}"
    case $state in
      idle|mix|alloc) ready=$(( ready + 1 )) ;;
      down*|drain*|drng*|fail*) scontrol update NodeName="$name" State=RESUME >/dev/null 2>&1 || true ;;
    esac
  done
  if (( ready == NODES )); then
    say "$DESCRIPTION is up:$states (MpiDefault=$MPI_DEFAULT, $CPUS CPUs per node)"
    exit 0
  fi
  sleep 1
done
die "not every node is idle after ${WAIT_S}s (${states# }); see /var/log/slurm/slurmctld.log and slurmd*.log"
