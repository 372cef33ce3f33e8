#!/usr/bin/env bash
# How long one checkpoint save takes on one node and across two (bench/RESULTS.md "Cross-node checkpoint
# save"): tiny-chat on 4 ranks (dp_shard 4), --max_steps 2 --save_steps 2, one checkpoint. The save is
# the time from the `eval step 2` line to the `checkpoint saved` line, each line time-stamped as it
# arrives. One node: the 4 ranks on this host (shared memory). Two nodes: 2 + 2 ranks on the network
# namespaces of `scripts/start-local-slurm.sh --nodes 2` (TCP over their bridge; mpirun --hostfile as in
# tests/e2e/test_two_node_mpirun.sh). The cases alternate, one-node then two-node, REPEATS times, so
# both see the same load; the load average is printed with each pair.
#   bash bench/cross_node_save.sh TRLHPC [REPEATS]
set -euo pipefail
TRLHPC=$(realpath "$1")
REPEATS=${2:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1
if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
STATE=/run/trlhpc-local-slurm
[[ -f $STATE/nodes ]] || { echo "no local cluster: scripts/start-local-slurm.sh --nodes 2" >&2; exit 1; }
mapfile -t NODE_ADDRS < <(awk '{print $2}' "$STATE/nodes")
SUBNET=$(cat "$STATE/subnet")
printf '%s slots=2\n' "${NODE_ADDRS[@]:0:2}" >"$WORK/hostfile"
ONE_NODE=(mpirun --oversubscribe --bind-to none -np 4)
TWO_NODES=(mpirun --hostfile "$WORK/hostfile" -np 4 --map-by slot --bind-to none
  --mca plm_rsh_agent "$ROOT/scripts/local-node-exec.sh" --mca plm_rsh_no_tree_spawn 1
  --mca oob_tcp_if_include "$SUBNET" --mca btl_tcp_if_include "$SUBNET" --mca btl self,vader,tcp)
FLAGS=(sft --config examples/tiny-chat/sft.yaml --max_steps 2 --save_steps 2 --eval_steps 2 --logging_steps 1)

# Prints the seconds from the `eval step 2` line to the `checkpoint saved` line of stdin (lines stamped
# on arrival), or fails when either is missing.
save_seconds() {
  python3 -u -c '
import sys, time
stamps = {}
for line in sys.stdin:
    now = time.monotonic()
    if line.startswith("eval step 2"): stamps["eval"] = now
    if line.startswith("checkpoint saved"): stamps["saved"] = now
    sys.stderr.write(line)
if len(stamps) != 2: sys.exit("no eval step 2 / checkpoint saved line")
print("%.3f" % (stamps["saved"] - stamps["eval"]))
'
}

run_case() {  # run_case NAME MPIRUN...
  local name=$1 out="$WORK/$1"
  shift
  rm -rf "$out"
  (cd "$ROOT" && timeout 300 "$@" "$TRLHPC" "${FLAGS[@]}" --output_dir "$out" 2>&1 | save_seconds 2>"$out.log") ||
    { tail -5 "$out.log" >&2; echo "failed"; }
}

echo "| repeat | load average (1 min) | one node s | two nodes s | ratio |"
echo "|---|---|---|---|---|"
for ((i = 1; i <= REPEATS; i++)); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  one=$(run_case one "${ONE_NODE[@]}")
  two=$(run_case two "${TWO_NODES[@]}")
  ratio=$(python3 -c "import sys; a, b = sys.argv[1:]; print(f'{float(b) / float(a):.1f}x')" "$one" "$two" 2>/dev/null || echo "-")
  echo "| $i | $load | $one | $two | $ratio |"
done
