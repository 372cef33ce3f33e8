#!/usr/bin/env bash
# Writes OUTDIR/trlhpc-<version>.tar.gz, the source EasyBuild's `sources = [SOURCE_TAR_GZ]` names: the
# files git tracks, as they are in the working tree (uncommitted edits included, untracked and ignored
# files such as build/ left out), under the top folder trlhpc-<version>/. Prints the tarball's path and
# its sha256 (what `checksums` in an easyconfig records).
# Usage: easybuild/make-source-tarball.sh OUTDIR
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUTDIR=$(mkdir -p "$1" && cd "$1" && pwd)
VERSION=$(sed -n 's/^project(trlhpc VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
[[ -n $VERSION ]] || { echo "$0: no version in $ROOT/CMakeLists.txt's project()" >&2; exit 1; }
git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 \
  || { echo "$0: $ROOT is not a git checkout; make the tarball from one (the file list is git's)" >&2; exit 1; }
TARBALL=$OUTDIR/trlhpc-$VERSION.tar.gz
# Tracked files deleted in the working tree are left out (tar would stop at them). Fixed owner, mode
# bits as checked out and sorted names, so the same tree gives the same file list in the same order.
(cd "$ROOT" && git ls-files -z | while IFS= read -r -d '' f; do [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done \
  | LC_ALL=C sort -z \
  | tar --null --no-recursion -T - --transform "s,^,trlhpc-$VERSION/," --owner=0 --group=0 --numeric-owner -czf "$TARBALL")
echo "$TARBALL"
sha256sum "$TARBALL" | cut -d' ' -f1
