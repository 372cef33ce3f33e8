#!/usr/bin/env bash
# `bench/gpu_check.sh prepare`: everything the one-shot H200 check needs, packed into the ignored folder
# .gpu/ of this checkout, for the device tool's `carry`:
#   .gpu/bin.tar.xz   trlhpc, the CUDA test binaries and gpu_bench, built for sm_90 only (Release, CUDA ON,
#                     no -march=native: the GPU host's CPU is not this one's; the CPU kernels pick their
#                     instruction set at run time), stripped; xz with a 64 MiB window, so the binaries'
#                     common library code is stored once
#   .gpu/debs/        the Debian runtime packages they load that the GPU machine lacks: Open MPI (+ its
#                     plugins' libraries), parallel HDF5, Boost.Program_options, OpenBLAS, ... (everything
#                     ldd resolves here except glibc, libstdc++/libgcc and CUDA: the GPU machine's CUDA and
#                     PyTorch wheels provide cudart, cuBLAS, cuDNN and NCCL)
#   .gpu/data/        stories260K and the C4 sample from ../shared/data (../shared does not travel)
#   .gpu/MANIFEST.txt the git commit, the build flags, each binary's and package's name, size and sha256
# Fails when .gpu/ plus the tracked files exceed the device tool's 64 MiB.
# Environment: GPU_BUILD (build folder, default build-gpu90), JOBS (default 2), SHARED_DATA.
set -eu -o pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${GPU_BUILD:-$ROOT/build-gpu90}
JOBS=${JOBS:-2}
SHARED_DATA=${SHARED_DATA:-$ROOT/../shared/data}
PACK=$ROOT/.gpu
LIMIT=$((64 * 1024 * 1024))
say() { echo "[gpu_check prepare] $*"; }
die() { echo "[gpu_check prepare] error: $*" >&2; exit 1; }

# Every CUDA test travels: the list is tests/cuda itself (a hand list once missed cuda_test_offload_staging).
CUDA_TESTS=()
for src in "$ROOT"/tests/cuda/test_*.cpp; do CUDA_TESTS+=("cuda_$(basename "$src" .cpp)"); done
[ -f "$SHARED_DATA/stories260K/model.safetensors" ] || die "no stories260K under $SHARED_DATA (set SHARED_DATA)"
[ -f "$SHARED_DATA/datasets/c4_text.jsonl" ] || die "no datasets/c4_text.jsonl under $SHARED_DATA"
command -v nvcc > /dev/null || export PATH=/usr/local/cuda/bin:$PATH
command -v nvcc > /dev/null || die "nvcc not found (a CUDA toolkit is needed to build for the GPU)"

# ---- build: sm_90 only, no -march=native -------------------------------------------------------------------
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
  -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
mkdir -p "$BUILD"
say "configure $BUILD (Release, CUDA ON, CMAKE_CUDA_ARCHITECTURES=90, TRLHPC_NATIVE=OFF)"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTRLHPC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DTRLHPC_NATIVE=OFF "${launcher[@]}" > "$BUILD/gpu_check_configure.log" 2>&1 || die "configure failed: $BUILD/gpu_check_configure.log"
grep -q 'CUDA backend ON (architectures 90)' "$BUILD/gpu_check_configure.log" || die "the CUDA backend is not ON: $BUILD/gpu_check_configure.log"
say "build trlhpc gpu_bench ${#CUDA_TESTS[@]} CUDA tests (-j$JOBS; the first build takes long)"
cmake --build "$BUILD" -j "$JOBS" --target trlhpc gpu_bench "${CUDA_TESTS[@]}" > "$BUILD/gpu_check_build.log" 2>&1 ||
  die "build failed: $(grep -m1 -E 'error' "$BUILD/gpu_check_build.log" || tail -3 "$BUILD/gpu_check_build.log") (log: $BUILD/gpu_check_build.log)"
if grep -q -- '-march=native' "$BUILD/CMakeFiles/trlhpc_kernels.dir/flags.make" 2> /dev/null; then
  die "$BUILD compiles with -march=native: the GPU host's CPU differs (TRLHPC_NATIVE must be OFF)"
fi

# ---- binaries -----------------------------------------------------------------------------------------------
rm -rf "$PACK"
mkdir -p "$PACK/bin" "$PACK/debs" "$PACK/data"
cp "$BUILD/trlhpc" "$BUILD/bench/gpu_bench" "$PACK/bin/"
for t in "${CUDA_TESTS[@]}"; do cp "$BUILD/tests/$t" "$PACK/bin/"; done
strip --strip-unneeded "$PACK"/bin/*
# sm_90 and nothing else: from the binaries where cuobjdump is installed, else from the compile flags.
archs=$(grep -h -o 'sm_[0-9a-z]*' "$BUILD/CMakeFiles/trlhpc_cuda.dir/flags.make" | sort -u | tr '\n' ' ')
[ "$archs" = "sm_90 " ] || die "the CUDA kernels are compiled for '$archs', not sm_90 alone"
if command -v cuobjdump > /dev/null; then
  for b in "$PACK"/bin/*; do
    cuobjdump --list-elf "$b" 2> /dev/null | grep -q 'sm_90' || die "$(basename "$b") holds no sm_90 code"
  done
fi

# ---- the runtime packages: ldd's answer here, plus Open MPI's launcher and plugins ----------------------------
OMPI_PLUGINS=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
PMIX_PLUGINS=/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
[ -d "$OMPI_PLUGINS" ] || die "Open MPI's plugins are not at $OMPI_PLUGINS (Debian 12's openmpi-bin expected)"
elves=("$PACK"/bin/* "$(readlink -f "$(command -v mpirun)")" /usr/bin/orted "$OMPI_PLUGINS"/*.so "$PMIX_PLUGINS"/*.so)
missing=$(for f in "${elves[@]}"; do ldd "$f" 2> /dev/null | grep 'not found' | sed "s|^|$(basename "$f"): |"; done | grep -v 'libcuda.so' || true)
[ -z "$missing" ] || die "libraries not found here: $missing"
owner() {  # the package owning library path $1 (Debian's merged /usr: try both spellings)
  local r
  r=$(readlink -f "$1")
  { dpkg -S "$r" || dpkg -S "${r#/usr}" || dpkg -S "/usr$r"; } 2> /dev/null | head -1 | cut -d: -f1
}
packages=$(
  for f in "${elves[@]}"; do ldd "$f" 2> /dev/null | awk '/=> \// {print $3}'; done | sort -u |
    grep -v -E '^/usr/local/cuda|/libcuda\.so|/nvidia/' | while read -r lib; do
      p=$(owner "$lib")
      [ -n "$p" ] || die "no Debian package owns $lib"
      echo "$p"
    done
  # Open MPI itself (mpirun, orted, help files, plugins) and what PMIx reads at run time.
  echo openmpi-bin openmpi-common libopenmpi3 libpmix2 libsasl2-modules-db | tr ' ' '\n'
)
# glibc, the C++ runtime and the compiler's support libraries are the GPU machine's own (newer) ones.
packages=$(echo "$packages" | grep -v -x -E 'libc6|libstdc\+\+6|libgcc-s1' | sort -u)
say "$(echo "$packages" | wc -l) runtime packages"
substituted=""
for p in $packages; do
  v=$(dpkg-query -W -f '${Version}' "$p")
  cached=$(ls /var/cache/apt/archives/"${p}_${v//:/%3a}"_*.deb 2> /dev/null | head -1 || true)
  if [ -n "$cached" ]; then
    cp "$cached" "$PACK/debs/"
  elif ! (cd "$PACK/debs" && apt-get download -q "$p=$v" > /dev/null 2>&1); then
    # The archive may have moved on (a binNMU such as 1.47.0-2 -> 1.47.0-2+b2): the same sources' candidate.
    (cd "$PACK/debs" && apt-get download -q "$p" > /dev/null 2>&1) ||
      die "cannot get $p $v: not in /var/cache/apt/archives and apt-get download failed (network?)"
    substituted="$substituted $p($v -> $(apt-cache policy "$p" | sed -n 's/ *Candidate: //p'))"
  fi
done

# ---- data ------------------------------------------------------------------------------------------------------
cp -r "$SHARED_DATA/stories260K" "$PACK/data/"
cp "$SHARED_DATA/datasets/c4_text.jsonl" "$PACK/data/"
chmod -R u+w "$PACK/data"

# ---- manifest, then the binaries into one archive ---------------------------------------------------------------
commit=$(git -C "$ROOT" rev-parse HEAD)
dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no | head -1)
{
  echo "commit: $commit${dirty:+ (plus uncommitted changes)}"
  echo "prepared: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(. /etc/os-release && echo "$PRETTY_NAME"))"
  echo "build: $BUILD Release TRLHPC_CUDA=ON CMAKE_CUDA_ARCHITECTURES=90 TRLHPC_NATIVE=OFF, $(nvcc --version | tail -1)"
  echo "## binaries (stripped): name bytes sha256"
  for b in "$PACK"/bin/*; do echo "$(basename "$b") $(stat -c %s "$b") $(sha256sum "$b" | cut -c1-64)"; done
  [ -z "$substituted" ] || echo "debs not at the installed version (the archive's candidate instead):$substituted"
  echo "## debs: file bytes sha256"
  for d in "$PACK"/debs/*.deb; do echo "$(basename "$d") $(stat -c %s "$d") $(sha256sum "$d" | cut -c1-64)"; done
  echo "## data"
  (cd "$PACK/data" && find . -type f -printf '%P %s\n' | sort)
} > "$PACK/MANIFEST.txt"
say "compress the binaries (xz -9, 64 MiB window)"
tar -C "$PACK" -cf - bin | xz -9 -T1 > "$PACK/bin.tar.xz"
raw=$(du -sb "$PACK/bin" | cut -f1)
rm -rf "$PACK/bin"
echo "## bin.tar.xz $(stat -c %s "$PACK/bin.tar.xz") bytes ($raw unpacked)" >> "$PACK/MANIFEST.txt"

# ---- the device tool's limit: .gpu plus every tracked file ---------------------------------------------------------
packed=$(du -sb "$PACK" | cut -f1)
tracked=$(cd "$ROOT" && git ls-files -z | xargs -0 stat -c %s 2> /dev/null | awk '{s += $1} END {print s + 0}')
say "packed .gpu/: $((packed / 1024 / 1024)) MiB ($packed bytes: binaries $(stat -c %s "$PACK/bin.tar.xz"), debs $(du -sb "$PACK/debs" | cut -f1), data $(du -sb "$PACK/data" | cut -f1)); tracked files $((tracked / 1024 / 1024)) MiB; together $(((packed + tracked) / 1024 / 1024)) of 64 MiB"
[ $((packed + tracked)) -le $LIMIT ] || die ".gpu/ ($packed bytes) plus the tracked files ($tracked) exceed the device tool's 64 MiB"
say "done: carry [\".gpu\"] and run: bash bench/gpu_check.sh run"
