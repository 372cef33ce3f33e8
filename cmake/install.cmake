# What `make -f Makefile.hpc install PREFIX=...` (cmake --install --prefix PREFIX) puts under PREFIX:
#   bin/trlhpc
#   share/trlhpc/configs/        accelerate-style profiles (--accelerate_config FILE)
#   share/trlhpc/examples/       the bundled default; tiny-chat/sft.yaml names its data by absolute path,
#                                so it runs from any directory and writes out/tiny-chat under that one
#   share/trlhpc/jobs/           the SLURM job scripts (single-node.slurm, multinode.slurm)
#   share/trlhpc/modulefiles/    trlhpc/<version>.lua for Lmod and trlhpc/<version> for Tcl Environment
#                                Modules, side by side: Lmod prefers the .lua, Environment Modules lists
#                                only files starting with #%Module, so `module use .../modulefiles;
#                                module load trlhpc` works with either
# The example config and the modulefiles name the prefix, known only when installing: they are written
# then (cmake/install_configured_files.cmake).
include(cmake/mpi_flavour.cmake)

install(TARGETS trlhpc RUNTIME DESTINATION bin)
install(DIRECTORY configs/ DESTINATION share/trlhpc/configs OPTIONAL)
install(DIRECTORY examples/ DESTINATION share/trlhpc/examples OPTIONAL
        REGEX "tiny-chat/sft\\.yaml$" EXCLUDE REGEX "__pycache__" EXCLUDE)
install(PROGRAMS jobs/single-node.slurm jobs/multinode.slurm DESTINATION share/trlhpc/jobs)
install(CODE "
  set(TRLHPC_SOURCE_DIR \"${CMAKE_CURRENT_SOURCE_DIR}\")
  set(TRLHPC_STAGE_DIR \"${CMAKE_CURRENT_BINARY_DIR}/install-configured\")
  set(TRLHPC_VERSION \"${PROJECT_VERSION}\")
  set(TRLHPC_MPI_FLAVOUR \"${TRLHPC_MPI_FLAVOUR}\")
  set(TRLHPC_MPIEXEC \"${MPIEXEC_EXECUTABLE}\")
  include(\"${CMAKE_CURRENT_SOURCE_DIR}/cmake/install_configured_files.cmake\")
")
