#!/usr/bin/env bash
# Runs a command on a node of the local cluster of `scripts/start-local-slurm.sh --nodes N`, the way
# `ssh NODE COMMAND...` would (the words are joined and run by sh), inside the node's network and UTS
# namespaces:
#   scripts/local-node-exec.sh trlhpc-n1 hostname
# NODE is a node name or address from /run/trlhpc-local-slurm/nodes. ssh-style options before NODE are
# ignored, so `mpirun --hostfile` can use it as its launch agent in place of ssh:
#   mpirun --mca plm_rsh_agent "$PWD/scripts/local-node-exec.sh" --hostfile HOSTS ...
set -euo pipefail
STATE=/run/trlhpc-local-slurm
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
[[ $# -ge 2 ]] || { echo "usage: local-node-exec.sh NODE COMMAND..." >&2; exit 255; }
node=$1; shift
[[ -f $STATE/nodes ]] || { echo "local-node-exec: no local cluster (run scripts/start-local-slurm.sh --nodes 2)" >&2; exit 255; }
name=$(awk -v n="$node" '$1 == n || $2 == n {print $1; exit}' "$STATE/nodes")
[[ -n $name ]] || { echo "local-node-exec: '$node' is not a node of the local cluster ($(awk '{printf "%s ", $0}' "$STATE/nodes"))" >&2; exit 255; }
exec nsenter --net="/var/run/netns/$name" --uts="$STATE/uts/$name" /bin/sh -c "$*"
