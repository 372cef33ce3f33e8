#%Module1.0
## Tcl modulefile (Environment Modules) for trlhpc. `make -f Makefile.hpc install PREFIX=...` copies it
## to PREFIX/share/trlhpc/modules/, and the prefix is found from that location:
##   module use PREFIX/share/trlhpc/modules && module load trlhpc
## (Environment Modules lists this file there as `trlhpc.tcl`: `module load trlhpc.tcl`.)
## Copied elsewhere (e.g. <modulepath>/trlhpc/0.1.0), set TRLHPC_PREFIX or edit `prefix` below.
proc ModulesHelp { } {
    puts stderr "trlhpc: supervised fine-tuning of decoder-only language models in C++ (mpirun/srun trlhpc sft)."
}
module-whatis "Name: trlhpc"
module-whatis "Description: SFT of Qwen2/Llama models for HPC clusters (MPI + OpenMP)"

# The MPI and libraries trlhpc was built with; names vary by site.
# prereq openmpi openblas hdf5

if { [info exists env(TRLHPC_PREFIX)] } {
    set prefix $env(TRLHPC_PREFIX)
} else {
    set prefix [file dirname [file dirname [file dirname [file dirname [file normalize $ModulesCurrentModulefile]]]]]
}
prepend-path PATH $prefix/bin
setenv TRLHPC_ROOT $prefix
