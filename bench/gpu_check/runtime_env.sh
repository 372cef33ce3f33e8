# Sourced by bench/gpu_check/run.sh: unpacks .gpu/ (made by prepare.sh) into a scratch prefix and sets up
# the environment the packed binaries run in on a machine without Debian's packages.
#   gpu_unpack PACK PREFIX   binaries into PREFIX/bin, each .deb with `dpkg -x` into PREFIX/root
#                            (python3's tarfile where xz is missing)
#   gpu_env PREFIX           exports GPU_LIBRARY_PATH (the packages' library folders, then CUDA's: the
#                            toolkit's and those of the nvidia-* / torch wheels of python3), the relocated
#                            Open MPI (OPAL_PREFIX and friends, PMIx's plugin path), GPU_MPIRUN
#   gpu_ldd_check PREFIX     every packed binary resolves every library (else names each missing one)
#   with_libs CMD...         runs CMD with LD_LIBRARY_PATH=GPU_LIBRARY_PATH (only our processes get it: the
#                            PyTorch peer keeps the machine's own libraries)
# Open MPI 4 finds its plugins, help files and configuration from the install prefix it was built with
# (/usr); OPAL_PREFIX and the OPAL_*DIR variables move each to the unpacked copy, and
# OMPI_MCA_mca_base_component_path / PMIX_MCA_mca_base_component_path name the plugin folders outright,
# so a machine that has its own Open MPI elsewhere cannot lend us its plugins.

gpu_unpack() {
  local pack=$1 prefix=$2
  mkdir -p "$prefix/root"
  if command -v xz > /dev/null; then
    tar -C "$prefix" -xJf "$pack/bin.tar.xz" || return 1
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
      "$pack/bin.tar.xz" "$prefix" || return 1
  fi
  local deb
  for deb in "$pack"/debs/*.deb; do
    dpkg -x "$deb" "$prefix/root" || { echo "dpkg -x $deb failed" >&2; return 1; }
  done
}

# The library folders of python3's CUDA wheels (nvidia/*/lib, torch/lib), if python3 has them.
cuda_wheel_lib_dirs() {
  python3 - 2> /dev/null <<'PY'
import importlib.util, os
dirs = []
for name in ("nvidia", "torch"):
    spec = importlib.util.find_spec(name)
    if spec is None:
        continue
    for base in spec.submodule_search_locations or []:
        for root, _, files in os.walk(base):
            if any(f.startswith("lib") and ".so" in f for f in files) and root not in dirs:
                dirs.append(root)
print(":".join(dirs))
PY
}

gpu_env() {
  local prefix=$1 root=$1/root
  local arch=x86_64-linux-gnu d libs=""
  # Every folder of the unpacked packages that holds shared libraries, except Open MPI's and PMIx's plugin
  # folders (dlopen'ed by path) and OpenBLAS's alternatives (the one variant the binaries were linked with).
  while read -r d; do
    case $d in */openmpi3 | */pmix) continue ;; esac
    libs="$libs:$d"
  done < <(find "$root" -name 'lib*.so*' \( -type f -o -type l \) -printf '%h\n' | sort -u)
  local cuda_dirs="" wheels
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64; do
    [ -d "$d" ] && cuda_dirs="$cuda_dirs:$d"
  done
  wheels=$(cuda_wheel_lib_dirs)
  export GPU_LIBRARY_PATH="${libs#:}${cuda_dirs}${wheels:+:$wheels}"
  export OPAL_PREFIX=$root/usr OPAL_EXEC_PREFIX=$root/usr OPAL_BINDIR=$root/usr/bin
  export OPAL_LIBDIR=$root/usr/lib/$arch/openmpi/lib OPAL_PKGLIBDIR=$root/usr/lib/$arch/openmpi/lib/openmpi3
  export OPAL_DATAROOTDIR=$root/usr/share OPAL_DATADIR=$root/usr/share OPAL_PKGDATADIR=$root/usr/share/openmpi
  export OPAL_SYSCONFDIR=$root/etc/openmpi
  export OMPI_MCA_mca_base_component_path=$OPAL_PKGLIBDIR
  export PMIX_INSTALL_PREFIX=$root/usr PMIX_MCA_mca_base_component_path=$root/usr/lib/$arch/pmix2/lib/pmix
  # One node, ranks sharing a GPU: shared memory between ranks, nothing of InfiniBand/UCX/OFI.
  export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_mtl=^ofi,psm,psm2 OMPI_MCA_osc=^ucx
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export GPU_MPIRUN=$root/usr/bin/orterun
  export PATH=$prefix/bin:$root/usr/bin:$PATH
}

with_libs() {
  local p=$GPU_LIBRARY_PATH
  [ -n "${LD_LIBRARY_PATH:-}" ] && p=${p:+$p:}$LD_LIBRARY_PATH
  LD_LIBRARY_PATH=$p "$@"
}

# Prints "file: what is missing" for each unresolved library; status 1 if any. libcuda.so.1 is the
# driver's (only a GPU machine has it): its absence is reported separately by the caller.
gpu_ldd_check() {
  local prefix=$1 f bad=0 out
  for f in "$prefix"/bin/* "$GPU_MPIRUN" "$prefix"/root/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so; do
    out=$(with_libs ldd "$f" 2>&1 | grep -E 'not found|version .* not found' | grep -v 'libcuda\.so' || true)
    if [ -n "$out" ]; then
      echo "$(basename "$f"): $(echo "$out" | tr -s ' \t' ' ' | tr '\n' ';')"
      bad=1
    fi
  done
  return $bad
}
