#!/usr/bin/env bash
# trlhpc across two hosts without SLURM: `mpirun --hostfile` (2 slots on each of the local cluster's two
# nodes, Open MPI over TCP on the cluster's subnet, scripts/local-node-exec.sh as the launch agent in
# place of ssh) trains the bundled default on 4 ranks; the ranks report two hosts (trlhpc env) and the
# loss curve matches the same 4 ranks on one node (bound in tests/e2e/two_node_cluster.sh). Skipped
# (exit 77) without the namespaces of `scripts/start-local-slurm.sh --nodes 2` (root).
set -euo pipefail
if [[ -z ${TRLHPC_TWO_NODE_TEST_INNER:-} ]]; then
  TRLHPC_TWO_NODE_TEST_INNER=1 exec timeout 300 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
source "$ROOT/tests/e2e/two_node_cluster.sh"  # after lib.sh: its skip and fatal
require_local_namespaces
printf '%s slots=2\n' "${NODE_ADDRS[@]:0:2}" >"$WORK/hostfile"
echo "hostfile: $(tr '\n' ' ' <"$WORK/hostfile")subnet $SUBNET"
FLAGS=(--max_steps 8 --logging_steps 1 --eval_steps 0)
# No ssh between the nodes here: the launch agent enters a node's namespaces instead. Tree spawn off:
# mpirun starts every node's daemon itself. TCP only on the cluster's subnet (the host also has others).
MPIRUN_TWO_NODES=(mpirun --hostfile "$WORK/hostfile" -np 4 --map-by slot --bind-to none
  --mca plm_rsh_agent "$ROOT/scripts/local-node-exec.sh" --mca plm_rsh_no_tree_spawn 1
  --mca oob_tcp_if_include "$SUBNET" --mca btl_tcp_if_include "$SUBNET" --mca btl self,vader,tcp)

timeout 60 "${MPIRUN_TWO_NODES[@]}" "$TRLHPC" env --json >"$WORK/env.json" 2>"$WORK/env.err" \
  || { cat "$WORK/env.err"; fatal "mpirun --hostfile trlhpc env failed"; }
python3 - "$WORK/env.json" <<'PY' || { cat "$WORK/env.json"; fatal "mpirun --hostfile did not give 4 ranks on 2 hosts, 2 per host"; }
import json, sys
obj, _ = json.JSONDecoder().raw_decode(open(sys.argv[1]).read().lstrip())
hosts = [r["host"] for r in obj["ranks"]]
print("ranks on hosts", hosts)
sys.exit(0 if obj["world_size"] == 4 and obj["num_nodes"] == 2 and hosts[0] == hosts[1] != hosts[2] == hosts[3] else 1)
PY

reference_run "$WORK/ref" "${FLAGS[@]}"
(cd "$ROOT" && timeout 240 "${MPIRUN_TWO_NODES[@]}" "$TRLHPC" sft --config examples/tiny-chat/sft.yaml \
  "${FLAGS[@]}" --output_dir "$WORK/two" >"$WORK/two.log" 2>&1) || { cat "$WORK/two.log"; fatal "mpirun --hostfile trlhpc sft failed"; }
grep -q "dp_shard 4" "$WORK/two.log" || { cat "$WORK/two.log"; fatal "the log does not show 'dp_shard 4'"; }
compare_losses "$WORK/ref/metrics.jsonl" "$WORK/two/metrics.jsonl" || fatal "the two-host loss curve differs from one host's"
echo "PASSED: mpirun --hostfile over two hosts matches the one-node loss curve"
e2e_end
