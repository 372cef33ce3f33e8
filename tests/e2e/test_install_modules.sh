#!/usr/bin/env bash
# `make -f Makefile.hpc install PREFIX=...` and its modulefiles, as a user of a cluster meets them:
#  1. the prefix holds bin/trlhpc, the job scripts (byte for byte jobs/*.slurm), the example, and
#     modulefiles/trlhpc/<version>{.lua,} whose version is CMakeLists.txt's and whose "MPI:" line names
#     the MPI version the binary reports at run time (MPI_Get_library_version, via trlhpc env --json);
#  2. Lmod and Tcl Environment Modules each list exactly one trlhpc/<version> there, and after
#     `module use PREFIX/share/trlhpc/modulefiles; module load trlhpc` `trlhpc --version` prints it;
#  3. the installed example runs from another directory (mpirun -np 2, 2 steps) and writes
#     out/tiny-chat there, nothing under the prefix;
#  4. with a SLURM node up, the installed single-node.slurm submitted from that directory with only the
#     module loaded (no TRLHPC, no config argument, only flags) trains the installed example.
# Lmod and Environment Modules: scripts/install-module-systems.sh (root) provides both; a missing one is
# reported as SKIPPED (exit 77) after everything else ran.
set -euo pipefail
if [[ -z ${TRLHPC_INSTALL_TEST_INNER:-} ]]; then
  TRLHPC_INSTALL_TEST_INNER=1 exec timeout 400 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
BUILD=$(dirname "$TRLHPC")
PREFIX=$WORK/prefix
MODULEPATH_DIR=$PREFIX/share/trlhpc/modulefiles
VERSION=$(sed -n 's/^project(trlhpc VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
[[ -n $VERSION ]] || fatal "no version in CMakeLists.txt's project()"
missing=()

# 1. Install (the binary is already built: make only checks it).
[[ -f $BUILD/CMakeCache.txt ]] || fatal "$BUILD is not a CMake build dir"
make -C "$ROOT" -f Makefile.hpc install BUILD_DIR="$BUILD" PREFIX="$PREFIX" JOBS=1 >"$WORK/install.log" 2>&1 \
  || { cat "$WORK/install.log"; fatal "make -f Makefile.hpc install failed"; }
[[ -x $PREFIX/bin/trlhpc ]] || fatal "no bin/trlhpc"
for job in single-node multinode; do
  cmp "$ROOT/jobs/$job.slurm" "$PREFIX/share/trlhpc/jobs/$job.slurm" || fatal "share/trlhpc/jobs/$job.slurm is not jobs/$job.slurm"
  [[ -x $PREFIX/share/trlhpc/jobs/$job.slurm ]] || fatal "share/trlhpc/jobs/$job.slurm is not executable"
done
[[ -f $MODULEPATH_DIR/trlhpc/$VERSION.lua && -f $MODULEPATH_DIR/trlhpc/$VERSION ]] \
  || fatal "no modulefiles/trlhpc/$VERSION.lua and modulefiles/trlhpc/$VERSION ($(ls -R "$PREFIX/share/trlhpc" | tr '\n' ' '))"
# The MPI the binary runs with, e.g. "Open MPI v4.1.4, ..." -> 4.1.4; the modulefiles must name it.
MPI_VERSION=$("$TRLHPC" env --json | python3 -c '
import json, re, sys
obj, _ = json.JSONDecoder().raw_decode(sys.stdin.read().lstrip())
print(re.search(r"\d+\.\d+(\.\d+)?", obj["versions"]["MPI library"]).group(0))')
for f in "$VERSION.lua" "$VERSION"; do
  grep -i "whatis.*MPI: .*$MPI_VERSION" "$MODULEPATH_DIR/trlhpc/$f" >/dev/null \
    || fatal "modulefiles/trlhpc/$f does not name the MPI the binary runs with ($MPI_VERSION)"
done
echo "installed trlhpc $VERSION into $PREFIX; modulefiles name MPI $MPI_VERSION"

check_module_system() {  # NAME SETUP: SETUP defines `module`; lists trlhpc, loads it, runs trlhpc --version
  local name=$1 setup=$2 out
  out=$(PATH=/usr/bin:/bin MODULEPATH='' bash -c "$setup
    module use '$MODULEPATH_DIR'
    echo AVAIL: \$(module -t avail trlhpc 2>&1)
    module load trlhpc || exit 1
    echo VERSION: \$(trlhpc --version)
    echo ROOT: \$TRLHPC_ROOT" 2>&1) || { echo "$out"; fatal "$name: module load trlhpc failed"; }
  echo "$name: $(echo "$out" | tr '\n' ' ')"
  local avail
  avail=$(sed -n 's/^AVAIL: //p' <<<"$out" | tr ' ' '\n' | grep -v -e '^$' -e ':$')
  [[ $avail == "trlhpc/$VERSION" ]] || fatal "$name: module avail lists '$(echo $avail)', not exactly trlhpc/$VERSION"
  grep -qx "VERSION: trlhpc $VERSION" <<<"$out" || fatal "$name: trlhpc --version after module load does not print 'trlhpc $VERSION'"
  grep -qx "ROOT: $PREFIX" <<<"$out" || fatal "$name: TRLHPC_ROOT is not $PREFIX"
}

# 2. Lmod, then Tcl Environment Modules (installed, or unpacked by scripts/install-module-systems.sh).
if [[ -f /usr/share/lmod/lmod/init/bash ]]; then
  check_module_system Lmod "source /usr/share/lmod/lmod/init/bash"
else
  missing+=("Lmod (/usr/share/lmod/lmod/init/bash)")
fi
MODULECMD=""
for f in /usr/lib/x86_64-linux-gnu/modulecmd.tcl /opt/environment-modules/usr/lib/x86_64-linux-gnu/modulecmd.tcl; do
  [[ -f $f ]] && { MODULECMD=$f; break; }
done
if [[ -n $MODULECMD ]] && command -v tclsh8.6 >/dev/null; then
  check_module_system "Environment Modules" "module() { eval \"\$(tclsh8.6 $MODULECMD bash \"\$@\")\"; }"
else
  missing+=("Tcl Environment Modules (modulecmd.tcl, tclsh8.6)")
fi

# 3. The installed example from another directory, as a user with only the module loaded would run it.
mkdir -p "$WORK/elsewhere"
touch "$WORK/before-run"
(cd "$WORK/elsewhere" && PATH=$PREFIX/bin:$PATH timeout 120 mpirun --oversubscribe -np 2 trlhpc sft \
  --config "$PREFIX/share/trlhpc/examples/tiny-chat/sft.yaml" --max_steps 2 --logging_steps 1 --eval_steps 0 \
  >"$WORK/example.log" 2>&1) || { cat "$WORK/example.log"; fatal "the installed example does not run from another directory"; }
grep -q '"step":2,' "$WORK/elsewhere/out/tiny-chat/metrics.jsonl" || fatal "the example wrote no out/tiny-chat/metrics.jsonl under its directory"
[[ -s $WORK/elsewhere/out/tiny-chat/model.safetensors ]] || fatal "the example saved no model under its directory"
written=$(find "$PREFIX" -newer "$WORK/before-run" | head -n3)
[[ -z $written ]] || fatal "the example wrote into the install prefix: $written"
echo "the installed example ran from $WORK/elsewhere and wrote out/tiny-chat there"

# 4. The installed job script with only the module's environment (TRLHPC_ROOT, PATH).
if command -v sbatch >/dev/null && sinfo -h -N -o '%c %t' 2>/dev/null | awk '$1 >= 2 && $2 ~ /^(idle|mix|alloc|comp)/ {ok = 1} END {exit !ok}'; then
  mkdir -p "$WORK/job"
  (cd "$WORK/job" && env -u TRLHPC PATH="$PREFIX/bin:$PATH" TRLHPC_ROOT="$PREFIX" sbatch --wait --output=job.out --time=5 \
    "$PREFIX/share/trlhpc/jobs/single-node.slurm" --max_steps 2 --logging_steps 1 --eval_steps 0 >sbatch.txt 2>&1) || { cat "$WORK/job/sbatch.txt" "$WORK/job/job.out"; fatal "sbatch of the installed single-node.slurm failed"; }
  grep -qF ", trlhpc, config $PREFIX/share/trlhpc/examples/tiny-chat/sft.yaml" "$WORK/job/job.out" \
    || { cat "$WORK/job/job.out"; fatal "the installed job script did not run the installed example"; }
  grep -q '"step":' "$WORK/job/out/tiny-chat/metrics.jsonl" || fatal "the installed job wrote no out/tiny-chat under its directory"
  echo "the installed single-node.slurm trained the installed example"
else
  echo "not checked: the installed job script under SLURM (no SLURM node up with >= 2 CPUs)"
fi

(( ${#missing[@]} == 0 )) || skip "not found: ${missing[*]} (scripts/install-module-systems.sh provides them)"
echo "PASSED: install, Lmod and Environment Modules load trlhpc $VERSION, the example runs from anywhere"
e2e_end
