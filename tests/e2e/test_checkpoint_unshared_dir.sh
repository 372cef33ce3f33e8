#!/usr/bin/env bash
# Issue 30, the MPI-IO-free save: every rank opens state.h5, which rank 0 has just created with serial
# HDF5, and pwrite()s its share. A rank whose open fails must end the save on every rank with one clear
# error (exit 2) naming the file and the cause, within seconds (no collective left waiting), and leave
# no half-committed checkpoint: the earlier checkpoint intact and named by `latest`, no checkpoint-4 and
# no checkpoint-4.tmp. The realistic cause is an --output_dir that is not shared by every node (a
# node-local disk): here rank 1 runs in its own mount namespace (unshare -m) where --output_dir is a
# private copy of the folder taken after the first checkpoint, as a second node's local disk would be.
# It resumes from its copy, trains, and at the save finds no state.h5. Needs root (or CAP_SYS_ADMIN) for
# unshare and mount; skipped (exit 77) without.
set -u
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
unshare -m --propagation private true 2>/dev/null ||
  skip "cannot create a mount namespace (unshare -m needs root or CAP_SYS_ADMIN)"
TINY="sft --config $ROOT/examples/tiny-chat/sft.yaml --comm_progress none --save_steps 2"

# Rank 1 sees $NODE_VIEW at $OUT (its own namespace, a bind mount); rank 0 sees the real $OUT.
cat >"$WORK/node_local_output.sh" <<'WRAP'
#!/usr/bin/env bash
if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then
  exec unshare -m --propagation private bash -c 'mount --bind "$NODE_VIEW" "$OUT" && exec "$@"' bash "$@"
fi
exec "$@"
WRAP

unshared() {  # unshared NAME EXTRA...
  local name=$1
  shift
  local out=$WORK/$name/out view=$WORK/$name/node2 log=$WORK/$name.log
  mkdir -p "$WORK/$name"
  trlhpc_np 120 2 $TINY --max_steps 2 --output_dir "$out" >"$WORK/$name-first.log" 2>&1 || { fail_log "$name: the first run failed" "$WORK/$name-first.log"; return; }
  cp -a "$out" "$view" && rm -f "$view/.trlhpc.lock"
  (cd "$ROOT" && OUT=$out NODE_VIEW=$view OMP_NUM_THREADS=1 timeout 120 "$MPIRUN" --oversubscribe -np 2 \
    -x OUT -x NODE_VIEW bash "$WORK/node_local_output.sh" "$TRLHPC" $TINY --max_steps 4 --output_dir "$out" \
    --resume_from_checkpoint latest "$@") >"$log" 2>&1
  local rc=$?
  [ "$rc" -eq 124 ] && { fail_log "$name: hung (killed by timeout after 120 s)" "$log"; return; }
  grep -q "resumed from .*checkpoint-2" "$log" || { fail_log "$name: did not resume checkpoint-2 (set-up)" "$log"; return; }
  [ "$rc" -eq 2 ] || { fail_log "$name: exit $rc (want 2: the save failed)" "$log"; return; }
  local want="$out/checkpoint-4.tmp/state.h5, which rank 0 has just created, does not exist on"
  for r in 0 1; do
    grep "rank $r " "$log" | grep -qF "$want" || fail_log "$name: rank $r does not say '$want ...'" "$log"
    grep "rank $r " "$log" | grep -q "must be a folder that every node shares" ||
      fail_log "$name: rank $r does not say that --output_dir must be shared" "$log"
  done
  [ -f "$out/checkpoint-2/manifest.json" ] && [ -f "$out/checkpoint-2/state.h5" ] ||
    fail_log "$name: checkpoint-2 is not intact" "$log"
  [ "$(cat "$out/latest" 2>/dev/null)" = "checkpoint-2" ] || fail "$name: latest is '$(cat "$out/latest" 2>/dev/null)'"
  [ -e "$out/checkpoint-4.tmp" ] && fail "$name: the partial checkpoint-4.tmp was left behind"
  [ -e "$out/checkpoint-4" ] && fail "$name: a checkpoint-4 was committed although rank 1 wrote nothing"
  [ -e "$view/checkpoint-4" ] && fail "$name: a checkpoint-4 appeared in rank 1's folder"
  echo "ok   $name: $(grep -m1 'does not exist on' "$log")"
}

unshared sync
unshared async --async_save

e2e_end
