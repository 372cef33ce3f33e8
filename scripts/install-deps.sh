#!/usr/bin/env bash
# Installs the Debian packages trlhpc builds against. Idempotent and quiet; exits non-zero with a
# message naming what failed. On a cluster, load modules instead (see docs/guide/clusters.md).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  ccache                                # CI: the EasyBuild test's build reuses the main build's objects
  libopenmpi-dev openmpi-bin            # MPI (MPI::MPI_CXX)
  libhdf5-openmpi-dev                   # parallel HDF5, openmpi flavour
  libboost-program-options-dev libyaml-cpp-dev nlohmann-json3-dev
  libopenblas-dev libopenblas-openmp-dev libpcre2-dev libgtest-dev
  libsnappy-dev libzstd-dev zlib1g-dev  # Parquet page codecs (src/data/parquet/codec.cpp)
  gnuplot-nox                           # `trlhpc plot` (pngcairo terminal), run as a program
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get update -qq >/tmp/trlhpc-apt.log 2>&1; then
  echo "install-deps: apt-get update failed (see /tmp/trlhpc-apt.log)" >&2; exit 1
fi
if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >>/tmp/trlhpc-apt.log 2>&1; then
  echo "install-deps: apt-get install failed for: ${missing[*]} (see /tmp/trlhpc-apt.log)" >&2; exit 1
fi
echo "install-deps: done"
