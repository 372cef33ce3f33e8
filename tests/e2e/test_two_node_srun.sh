#!/usr/bin/env bash
# trlhpc across two SLURM nodes: `srun -N2 --ntasks-per-node=2 trlhpc env --json --tp_size 2` forms one
# world of 4 ranks on two distinct hosts (the hosts srun itself reports), ranks placed in blocks per node,
# every tp group inside one node and every dp group across both. Skipped (exit 77) without two idle SLURM
# nodes: `scripts/start-local-slurm.sh --nodes 2` makes them on one machine (root, network namespaces).
set -euo pipefail
if [[ -z ${TRLHPC_TWO_NODE_TEST_INNER:-} ]]; then
  TRLHPC_TWO_NODE_TEST_INNER=1 exec timeout 180 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
source "$ROOT/tests/e2e/two_node_cluster.sh"  # after lib.sh: its skip and fatal
require_two_slurm_nodes
cd "$WORK"

# The hosts as SLURM's own launcher sees them (one task per node).
srun -N2 --ntasks-per-node=1 --time=2 hostname >"$WORK/hosts.txt" 2>"$WORK/hosts.err" \
  || { cat "$WORK/hosts.txt" "$WORK/hosts.err"; fatal "srun -N2 hostname failed"; }
srun -N2 --ntasks-per-node=2 --mpi=pmix --time=2 "$TRLHPC" env --json --tp_size 2 >"$WORK/env.json" 2>"$WORK/env.err" \
  || { cat "$WORK/env.err"; fatal "srun -N2 trlhpc env --json exited non-zero"; }
python3 - "$WORK/env.json" "$WORK/hosts.txt" <<'PY' || { cat "$WORK/env.json" "$WORK/env.err"; fatal "the two-node world is not as expected"; }
import json, sys
obj, _ = json.JSONDecoder().raw_decode(open(sys.argv[1]).read().lstrip())
srun_hosts = sorted(open(sys.argv[2]).read().split())
assert len(set(srun_hosts)) == 2, f"srun -N2 hostname printed {srun_hosts}: not two distinct hosts"
assert obj["world_size"] == 4, obj["world_size"]
assert obj["num_nodes"] == 2, obj["num_nodes"]
hosts = {r["rank"]: r["host"] for r in obj["ranks"]}
assert sorted(set(hosts.values())) == srun_hosts, f"trlhpc sees hosts {sorted(set(hosts.values()))}, srun {srun_hosts}"
assert hosts[0] == hosts[1] != hosts[2] == hosts[3], f"ranks are not in blocks per node: {hosts}"
for r in obj["ranks"]:
    tp = r["groups"]["tp"]["members"]
    assert len(tp) == 2 and len({hosts[m] for m in tp}) == 1, f"rank {r['rank']}: tp group {tp} spans hosts"
    dp = r["groups"]["dp_shard"]["members"]
    assert len(dp) == 2 and len({hosts[m] for m in dp}) == 2, f"rank {r['rank']}: dp group {dp} not across nodes"
print("hosts", srun_hosts, "ranks by host", hosts, "mesh", obj["mesh"])
PY
echo "PASSED: srun -N2 gives 4 ranks on two hosts, tp groups inside a node"
e2e_end
