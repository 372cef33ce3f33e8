# Run by `cmake --install` (see cmake/install.cmake): writes the files that name the install prefix into
# a staging folder of the build tree, then installs them from there (file(INSTALL) honours DESTDIR and
# records them in install_manifest.txt).
set(TRLHPC_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(stage "${TRLHPC_STAGE_DIR}")
file(REMOVE_RECURSE "${stage}")

configure_file("${TRLHPC_SOURCE_DIR}/modules/trlhpc.lua.in" "${stage}/modulefiles/trlhpc/${TRLHPC_VERSION}.lua" @ONLY)
configure_file("${TRLHPC_SOURCE_DIR}/modules/trlhpc.tcl.in" "${stage}/modulefiles/trlhpc/${TRLHPC_VERSION}" @ONLY)

# The example's data paths are relative to a checkout's root; installed, they name the installed copies.
# output_dir stays relative, so a run writes under the directory it was started in.
file(READ "${TRLHPC_SOURCE_DIR}/examples/tiny-chat/sft.yaml" config)
string(REGEX REPLACE "(^|\n)([a-z_]+): examples/" "\\1\\2: ${TRLHPC_PREFIX}/share/trlhpc/examples/" config "${config}")
string(REPLACE "# The bundled default: `make -f Makefile.hpc run` trains this on 2 MPI ranks."
       "# The bundled default, installed: `mpirun -np 2 trlhpc sft --config ${TRLHPC_PREFIX}/share/trlhpc/examples/tiny-chat/sft.yaml`\n# from any directory writes out/tiny-chat there."
       config "${config}")
file(WRITE "${stage}/examples/tiny-chat/sft.yaml" "${config}")

file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/share/trlhpc" TYPE DIRECTORY
     FILES "${stage}/modulefiles" "${stage}/examples")
