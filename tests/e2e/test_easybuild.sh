#!/usr/bin/env bash
# easybuild/trlhpc-<version>.eb as an HPC centre's staff would use it, with EasyBuild 5 from PyPI:
#  0. every easyconfig variant parses with EasyBuild and agrees with the tested one where it should;
#  1. the source tarball is made from this working tree (easybuild/make-source-tarball.sh) and its sha256,
#     computed here, is recorded in a copy of the easyconfig; with a wrong sha256 eb refuses the source;
#  2. eb builds and installs it with the SYSTEM toolchain (osdependencies checked, the sanity checks
#     `trlhpc --version` and `trlhpc env` run with the module loaded) into a temporary installpath;
#  3. under Lmod, `module use INSTALLPATH/modules/all` lists exactly trlhpc/<version>; after
#     `module load trlhpc`, `trlhpc --version` prints the version, trlhpc is the installed one and
#     TRLHPC_ROOT names the install folder;
#  4. with only the module loaded, the installed example runs from another directory (mpirun -np 2,
#     2 steps) and writes out/tiny-chat there, nothing under the install folder.
# EasyBuild's build is the binary only (no tests, benchmarks, CUDA) with -j nproc; its wall time is
# printed. Cold it is ~9 CPU-minutes of compiling (measured: 8m54s user+sys, -j 2, CCACHE_DISABLE=1), so
# about 5 minutes on 2 idle cores. When CMAKE_CXX_COMPILER_LAUNCHER=ccache is set (.ci/run sets it for the
# main build too), the CMake that eb runs uses it: eb builds in BUILD/easybuild-test.*/.../
# trlhpc-<version>/build, the same layout relative to the sources as BUILD, so with CCACHE_BASEDIR above
# both, and the compilers named alike, every object but 4 is reused (those see TRLHPC_HAVE_CUDA or
# TRLHPC_SOURCE_DIR); measured with a full cache: eb 74 s, this test 89 s.
# Exit 77 (skipped, with the reason) where EasyBuild cannot be installed (no pip or PyPI) or Lmod is
# missing (scripts/install-module-systems.sh provides it).
set -euo pipefail
if [[ -z ${TRLHPC_EASYBUILD_TEST_INNER:-} ]]; then
  TRLHPC_EASYBUILD_TEST_INNER=1 exec timeout 1750 bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
e2e_begin "$@"
BUILD=$(dirname "$TRLHPC")
# eb's build folder sits next to BUILD (the ccache layout above): this WORK replaces e2e_begin's.
rmdir "$WORK"
WORK=$(mktemp -d "$BUILD/easybuild-test.XXXXXX")
# All the CPUs for eb's build: GNU nproc would answer OMP_NUM_THREADS, which ctest (and this script, for
# the example's ranks) sets to 1.
BUILD_JOBS=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
VERSION=$(sed -n 's/^project(trlhpc VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
[[ -n $VERSION ]] || fatal "no version in CMakeLists.txt's project()"
EASYCONFIG=$ROOT/easybuild/trlhpc-$VERSION.eb
[[ -f $EASYCONFIG ]] || fatal "no $EASYCONFIG for CMakeLists.txt's version $VERSION (rename it with the version)"
LMOD_INIT=/usr/share/lmod/lmod/init/bash
[[ -f $LMOD_INIT ]] || skip "Lmod not found ($LMOD_INIT; scripts/install-module-systems.sh provides it)"

# EasyBuild 5 into a virtual environment, kept in BUILD between runs. The easyconfigs collection is
# not needed (the easyconfig is given by path and has no module dependencies).
VENV=$BUILD/easybuild-venv
export PATH=$VENV/bin:$PATH  # eb runs `python` from PATH
if ! "$VENV/bin/eb" --version 2>/dev/null | grep -q 'EasyBuild 5\.'; then
  rm -rf "$VENV"
  python3 -m venv "$VENV" >"$WORK/venv.log" 2>&1 || { cat "$WORK/venv.log"; skip "python3 -m venv failed: no pip for EasyBuild"; }
  start=$SECONDS
  timeout 300 "$VENV/bin/pip" install --disable-pip-version-check --timeout 20 --retries 2 -q 'easybuild-framework>=5,<6' 'easybuild-easyblocks>=5,<6' \
    >"$WORK/pip.log" 2>&1 || { tail -n 5 "$WORK/pip.log"; rm -rf "$VENV"; skip "pip install easybuild failed (PyPI unreachable?)"; }
  echo "pip installed $("$VENV/bin/eb" --version 2>&1) in $((SECONDS - start)) s"
fi
source "$LMOD_INIT"
module purge >/dev/null 2>&1 || true
export MODULEPATH=

# 0. The centre variants (not built here) parse and agree with the tested one (tests/e2e/easyconfig_variants.py).
python "$ROOT/tests/e2e/easyconfig_variants.py" "$VERSION" "$ROOT"/easybuild/trlhpc-*.eb >"$WORK/variants.log" 2>&1 \
  || { cat "$WORK/variants.log"; fatal "the easyconfig variants disagree (above)"; }
tail -n 1 "$WORK/variants.log"

# 1. The source tarball and its checksum, recorded in a copy of the easyconfig.
mapfile -t tarball < <("$ROOT/easybuild/make-source-tarball.sh" "$WORK/sources/t/trlhpc")
SHA256=${tarball[1]}
[[ -f ${tarball[0]} && $SHA256 =~ ^[0-9a-f]{64}$ ]] || fatal "make-source-tarball.sh gave '${tarball[*]}'"
mkdir -p "$WORK/ec" "$WORK/ec-wrong"
grep -qx 'checksums = \[\]' "$EASYCONFIG" || fatal "$EASYCONFIG has no line 'checksums = []' to record the tarball's sha256 in"
sed "s/^checksums = \[\]\$/checksums = ['$SHA256']/" "$EASYCONFIG" >"$WORK/ec/trlhpc-$VERSION.eb"
sed "s/^checksums = \[\]\$/checksums = ['$(printf '0%.0s' {1..64})']/" "$EASYCONFIG" >"$WORK/ec-wrong/trlhpc-$VERSION.eb"

EB_ARGS=(--installpath="$WORK/install" --buildpath="$WORK/build" --sourcepath="$WORK/sources"
         --repositorypath="$WORK/ebfiles_repo" --tmpdir="$WORK/tmp" --modules-tool=Lmod --module-syntax=Lua
         --parallel="$BUILD_JOBS" --disable-cleanup-tmpdir --disable-rpath)
# --disable-rpath: the libraries are the OS's, in the linker's default path (and CMake records the one
# outside it, OpenBLAS's OpenMP build); EasyBuild's RPATH mode would compile through a compiler wrapper
# it writes anew in each run, which ccache cannot recognise as the compiler of the main build.
# EasyBuild refuses root unless told (CI runs as root).
if [[ $(id -u) -eq 0 ]]; then EB_ARGS+=(--allow-use-as-root-and-accept-consequences); fi

# A source whose sha256 is not the recorded one is refused before anything is built.
if eb "${EB_ARGS[@]}" "$WORK/ec-wrong/trlhpc-$VERSION.eb" >"$WORK/eb-wrong.log" 2>&1; then
  fatal "eb accepted a source whose sha256 is not the easyconfig's"
fi
grep -qi "checksum verification.*failed" "$WORK/eb-wrong.log" || { cat "$WORK/eb-wrong.log"; fatal "eb failed, but not on the checksum"; }
[[ -z $(find "$WORK/install" -type f -not -path '*/.locks/*' 2>/dev/null) ]] || fatal "eb installed files despite the wrong checksum: $(find "$WORK/install" -type f | head -n3)"
echo "eb refused the tarball under a wrong sha256"

# 2. Build and install (osdependencies checked, sanity checks run with the module loaded).
# The compilations eb runs, counted apart from the cache's other users (printed below).
export CCACHE_STATSLOG=$WORK/ccache-stats.log
start=$SECONDS
eb "${EB_ARGS[@]}" "$WORK/ec/trlhpc-$VERSION.eb" >"$WORK/eb.log" 2>&1 || {
  tail -n 40 "$WORK/eb.log"
  for log in "$WORK"/tmp/eb-*/easybuild-trlhpc-*.log; do [[ -f $log ]] && tail -n 60 "$log"; done
  fatal "eb trlhpc-$VERSION.eb failed"; }
EB_SECONDS=$((SECONDS - start))
INSTALLDIR=$WORK/install/software/trlhpc/$VERSION
[[ -x $INSTALLDIR/bin/trlhpc ]] || fatal "no $INSTALLDIR/bin/trlhpc after eb"
# eb keeps its log in the install folder; both sanity-check commands must have run there.
for cmd in 'trlhpc --version' 'trlhpc env'; do
  grep -qs "sanity check command $cmd.* ran successfully" "$INSTALLDIR"/easybuild/easybuild-trlhpc-*.log \
    || fatal "eb's log ($INSTALLDIR/easybuild) does not show the sanity check '$cmd' succeeding"
done
echo "eb built and installed trlhpc $VERSION (SYSTEM toolchain) in $EB_SECONDS s (-j $BUILD_JOBS, ${CMAKE_CXX_COMPILER_LAUNCHER:-no compiler launcher})"
if [[ -s $WORK/ccache-stats.log ]]; then
  echo "ccache during eb (base_dir $(ccache -k base_dir)):"; ccache --show-log-stats 2>&1 | sed -n '/Hits/,/Misses/p'
fi

# 3. Lmod, in a clean environment with only the module.
out=$(PATH=/usr/bin:/bin MODULEPATH='' bash -c "source '$LMOD_INIT'
  module use '$WORK/install/modules/all'
  echo AVAIL: \$(module -t avail trlhpc 2>&1)
  module load trlhpc || exit 1
  echo VERSION: \$(trlhpc --version)
  echo BINARY: \$(command -v trlhpc)
  echo ROOT: \$TRLHPC_ROOT" 2>&1) || { echo "$out"; fatal "Lmod: module load trlhpc failed"; }
echo "Lmod: $(echo "$out" | tr '\n' ' ')"
avail=$(sed -n 's/^AVAIL: //p' <<<"$out" | tr ' ' '\n' | grep -v -e '^$' -e ':$')
[[ $avail == "trlhpc/$VERSION" ]] || fatal "module avail lists '$(echo $avail)', not exactly trlhpc/$VERSION"
grep -qx "VERSION: trlhpc $VERSION" <<<"$out" || fatal "trlhpc --version after module load does not print 'trlhpc $VERSION'"
grep -qx "BINARY: $INSTALLDIR/bin/trlhpc" <<<"$out" || fatal "module load trlhpc does not put $INSTALLDIR/bin first on PATH"
grep -qx "ROOT: $INSTALLDIR" <<<"$out" || fatal "TRLHPC_ROOT is not $INSTALLDIR"

# 4. The installed example from another directory, with only the module loaded.
mkdir -p "$WORK/elsewhere"
touch "$WORK/before-run"
(cd "$WORK/elsewhere" && PATH=/usr/bin:/bin MODULEPATH='' timeout 120 bash -c "source '$LMOD_INIT'
  module use '$WORK/install/modules/all' && module load trlhpc || exit 1
  mpirun --oversubscribe -np 2 trlhpc sft --config \$TRLHPC_ROOT/share/trlhpc/examples/tiny-chat/sft.yaml \
    --max_steps 2 --logging_steps 1 --eval_steps 0" >"$WORK/example.log" 2>&1) \
  || { cat "$WORK/example.log"; fatal "the installed example does not run from another directory with the module loaded"; }
grep -q '"step":2,' "$WORK/elsewhere/out/tiny-chat/metrics.jsonl" || fatal "the example wrote no out/tiny-chat/metrics.jsonl under its directory"
[[ -s $WORK/elsewhere/out/tiny-chat/model.safetensors ]] || fatal "the example saved no model under its directory"
written=$(find "$INSTALLDIR" -newer "$WORK/before-run" | head -n3)
[[ -z $written ]] || fatal "the example wrote into the install folder: $written"
echo "the installed example ran from $WORK/elsewhere and wrote out/tiny-chat there"
echo "PASSED: eb installed trlhpc $VERSION from the working tree's tarball (sha256 checked) in $EB_SECONDS s; Lmod loads it; the example runs"
e2e_end
