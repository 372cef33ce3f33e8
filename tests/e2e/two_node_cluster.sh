# shellcheck shell=bash
# Sourced by tests/e2e/test_two_node_*.sh (not a test itself): finds the two SLURM nodes (the local
# cluster of `scripts/start-local-slurm.sh --nodes 2`, or any SLURM with two idle nodes and a shared file
# system), runs the one-node reference on this host, and compares loss curves.
# Sourced after tests/e2e/lib.sh's e2e_begin (TRLHPC, ROOT, WORK, OMP_NUM_THREADS, Open MPI as root): its
# skip (exit 77, CTest's skip code) and fatal (exit 1) end the test when the cluster is missing or broken.
LOCAL_CLUSTER=/run/trlhpc-local-slurm
START_HINT="scripts/start-local-slurm.sh --nodes 2 (root, network namespaces) starts one"

# Two SLURM nodes up with >= 2 CPUs each and srun's pmix plugin (Open MPI ranks wire up through it).
require_two_slurm_nodes() {
  local tool
  for tool in srun sinfo sbatch squeue scancel; do
    command -v "$tool" >/dev/null || skip "$tool not found (no SLURM client installed); $START_HINT"
  done
  sinfo -h >/dev/null 2>&1 || skip "sinfo cannot reach a SLURM controller; $START_HINT"
  # Nodes still completing the previous test's job count: srun and sbatch wait for them.
  local up
  up=$(sinfo -h -N -o '%n %c %t' 2>/dev/null | awk '$2 >= 2 && $3 ~ /^(idle|mix|alloc|comp)/ {print $1}' | sort -u | wc -l)
  (( up >= 2 )) || skip "fewer than 2 SLURM nodes up with >= 2 CPUs (sinfo: $(sinfo -h -N -o '%n %t %c' | tr '\n' ' ')); $START_HINT"
  srun --mpi=list 2>&1 | grep -qw pmix || skip "srun has no pmix plugin; Open MPI ranks cannot wire up under srun"
}

# The local cluster's namespaces, for mpirun without SLURM: sets NODE_ADDRS (one per node) and SUBNET.
require_local_namespaces() {
  [[ -f $LOCAL_CLUSTER/nodes && -f $LOCAL_CLUSTER/subnet ]] || skip "no local multi-node cluster ($LOCAL_CLUSTER/nodes); $START_HINT"
  mapfile -t NODE_ADDRS < <(awk '{print $2}' "$LOCAL_CLUSTER/nodes")
  SUBNET=$(cat "$LOCAL_CLUSTER/subnet")
  (( ${#NODE_ADDRS[@]} >= 2 )) || skip "the local cluster has fewer than 2 nodes; $START_HINT"
  [[ $(id -u) -eq 0 ]] || skip "entering the nodes' namespaces needs root"
}

# The one-node reference: the same 4 ranks (dp_shard 4) started by mpirun on this host, on the bundled
# default (its paths are relative to the checkout).
reference_run() {  # OUT FLAGS...
  local out=$1; shift
  (cd "$ROOT" && timeout 300 mpirun --oversubscribe --bind-to none -np 4 "$TRLHPC" sft --config examples/tiny-chat/sft.yaml \
    --output_dir "$out" "$@" >"$out.log" 2>&1) || { cat "$out.log"; fatal "the one-node reference run (mpirun -np 4) failed"; }
}

# Every step logged in B has the loss and grad_norm A logged for it, and B logged every step A did.
# Bound 1e-6 relative: both runs are the same layout (4 ranks, dp_shard 4, the same data order), which
# computes every sum in the same order whatever the transport (shared memory, TCP across nodes, PMIx or
# mpirun wire-up), so they agree to the bit here (measured: 0); the bound leaves room only for an MPI
# that picks another all-reduce algorithm for ranks spread over nodes (fp32 rounding, ~1e-7 per step).
# A wrong rank placement, a lost or doubled batch, or a resume from the wrong step moves the loss by
# >1e-3.
LOSS_BOUND=1e-6
compare_losses() {  # A/metrics.jsonl B/metrics.jsonl
  python3 - "$1" "$2" "$LOSS_BOUND" <<'PY'
import json, sys
def steps(path):
    out = {}
    for line in open(path):
        row = json.loads(line)
        if "loss" in row:
            assert row["step"] not in out, f"{path}: step {row['step']} logged twice"
            out[row["step"]] = row
    return out
a, b, bound = steps(sys.argv[1]), steps(sys.argv[2]), float(sys.argv[3])
assert a, f"{sys.argv[1]} has no loss"
assert sorted(a) == sorted(b), f"logged steps differ: {sorted(a)} vs {sorted(b)}"
worst = 0.0
for step, row in b.items():
    for key in ("loss", "grad_norm"):
        x, y = row[key], a[step][key]
        worst = max(worst, abs(x - y) / abs(y) if y else abs(x))
last = max(a)
print(f"{len(b)} steps compared, final loss {b[last]['loss']:.6f} vs {a[last]['loss']:.6f}, "
      f"worst relative difference {worst:.3g} (bound {bound:g})")
sys.exit(0 if worst <= bound else 1)
PY
}
