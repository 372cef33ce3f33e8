-- Lmod modulefile for trlhpc. `make -f Makefile.hpc install PREFIX=...` copies it to
-- PREFIX/share/trlhpc/modules/, and the prefix is found from that location:
--   module use PREFIX/share/trlhpc/modules && module load trlhpc
-- Copied elsewhere (e.g. <modulepath>/trlhpc/0.1.0.lua), set TRLHPC_PREFIX or edit `prefix` below.
help([[trlhpc: supervised fine-tuning of decoder-only language models in C++ (mpirun/srun trlhpc sft).]])
whatis("Name: trlhpc")
whatis("Description: SFT of Qwen2/Llama models for HPC clusters (MPI + OpenMP)")

-- The MPI and libraries trlhpc was built with; names vary by site.
-- depends_on("openmpi", "openblas", "hdf5")

local prefix = os.getenv("TRLHPC_PREFIX") or ""
if prefix == "" then
  local here = myFileName():match("^(.*)/[^/]*$") or "."
  prefix = here:gsub("/share/trlhpc/modules$", "")
end
prepend_path("PATH", pathJoin(prefix, "bin"))
setenv("TRLHPC_ROOT", prefix)
