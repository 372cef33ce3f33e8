# The library as one static target per area (docs/ARCHITECTURE.md "Layering"), each linking only the
# areas it may use, and a layering check per area that makes a forbidden arrow fail the build.
#
# trlhpc_add_area(NAME SOURCES files... USES areas... LIBS system-libraries...)
#   USES: the areas this one may call directly (their own USES are allowed too: the arrows are
#   transitive). LIBS: the system libraries it may call (not transitive: only runtime/ and parallel/
#   name MPI, only parallel/ HDF5, ...).
#
# The check: a shared library trlhpc_layering_<area> made of the WHOLE area archive, linked with
# -Wl,--no-undefined against the checks of its allowed areas and its own LIBS only. A call into an area
# or a library outside those (model -> train, model -> MPI_Barrier) is an undefined reference there and
# fails the build, although the static trlhpc binary, which links everything, would have linked.
# Skipped under sanitizers (their runtimes are not linked into shared objects) and TRLHPC_LAYERING=OFF.

option(TRLHPC_LAYERING "Build the per-area layering checks (shared objects linked with --no-undefined)" ON)
if(TRLHPC_SANITIZE OR TRLHPC_FUZZ)
  set(TRLHPC_LAYERING OFF)
endif()

# What every area compiles against: the public headers, their third-party headers (MPI's and HDF5's
# types appear in parallel/ headers that train/ and cli/ include: headers only, no library), the
# project-wide definitions.
add_library(trlhpc_headers INTERFACE)
target_include_directories(trlhpc_headers INTERFACE ${PROJECT_SOURCE_DIR}/include ${OPENBLAS_CBLAS_INCLUDE}
  ${HDF5_INCLUDE_DIRS} ${MPI_CXX_INCLUDE_DIRS})
# OMPI_SKIP_MPICXX/MPICH_SKIP_MPICXX: mpi.h without MPI's deprecated C++ bindings, whose inline classes
# put MPI symbols into every object that includes a header naming an MPI type (train/, cli/).
target_compile_definitions(trlhpc_headers INTERFACE TRLHPC_VERSION="${PROJECT_VERSION}" ${HDF5_DEFINITIONS}
  TRLHPC_SOURCE_DIR="${PROJECT_SOURCE_DIR}" OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
target_link_libraries(trlhpc_headers INTERFACE nlohmann_json::nlohmann_json)
if(TRLHPC_WITH_CUDA)
  target_include_directories(trlhpc_headers INTERFACE ${CUDAToolkit_INCLUDE_DIRS} ${PROJECT_SOURCE_DIR}/kernels/cuda)
  target_compile_definitions(trlhpc_headers INTERFACE TRLHPC_HAVE_CUDA=1)
  target_compile_options(trlhpc_headers INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
endif()

set(TRLHPC_AREAS "")
function(trlhpc_add_area name)
  cmake_parse_arguments(A "" "" "SOURCES;USES;LIBS" ${ARGN})
  add_library(trlhpc_${name} STATIC ${A_SOURCES})
  target_include_directories(trlhpc_${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(trlhpc_${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
  target_link_libraries(trlhpc_${name} PUBLIC trlhpc_headers OpenMP::OpenMP_CXX ${A_LIBS})
  set(closure "")
  foreach(use ${A_USES})
    target_link_libraries(trlhpc_${name} PUBLIC trlhpc_${use})
    get_property(used_closure GLOBAL PROPERTY TRLHPC_AREA_CLOSURE_${use})
    list(APPEND closure ${use} ${used_closure})
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set_property(GLOBAL PROPERTY TRLHPC_AREA_CLOSURE_${name} ${closure})
  set(TRLHPC_AREAS ${TRLHPC_AREAS} ${name} PARENT_SCOPE)
  if(TRLHPC_LAYERING)
    trlhpc_layering_check(trlhpc_layering_${name} ARCHIVE trlhpc_${name} USES ${closure} LIBS ${A_LIBS})
  endif()
endfunction()

# trlhpc_layering_check(TARGET ARCHIVE static-target USES areas... LIBS libraries... [EXCLUDE_FROM_ALL])
# (also used by tests/layering for its probes). USES must already be closed under the arrows.
function(trlhpc_layering_check target)
  cmake_parse_arguments(C "EXCLUDE_FROM_ALL" "ARCHIVE" "USES;LIBS" ${ARGN})
  add_library(${target} SHARED ${PROJECT_SOURCE_DIR}/cmake/layering_check.cpp)
  if(C_EXCLUDE_FROM_ALL)
    set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()
  set(link -Wl,--whole-archive $<TARGET_FILE:${C_ARCHIVE}> -Wl,--no-whole-archive)
  foreach(use ${C_USES})
    list(APPEND link $<TARGET_FILE:trlhpc_layering_${use}>)
    add_dependencies(${target} trlhpc_layering_${use})
  endforeach()
  add_dependencies(${target} ${C_ARCHIVE})
  target_link_libraries(${target} PRIVATE ${link} ${C_LIBS} OpenMP::OpenMP_CXX)
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
endfunction()

# ---- the areas, lowest first -----------------------------------------------------------------------
macro(trlhpc_sources var)
  file(GLOB_RECURSE ${var} CONFIGURE_DEPENDS ${ARGN})
endmacro()
macro(trlhpc_cuda_sources var)
  set(${var} "")
  if(TRLHPC_WITH_CUDA)
    file(GLOB_RECURSE ${var} CONFIGURE_DEPENDS ${ARGN})
  endif()
endmacro()

trlhpc_sources(core_src src/core/*.cpp)
trlhpc_add_area(core SOURCES ${core_src})

trlhpc_sources(kernels_src kernels/cpu/*.cpp)
trlhpc_add_area(kernels SOURCES ${kernels_src} USES core LIBS BLAS::BLAS)

set(cuda_area "")
set(cuda_libs "")
if(TRLHPC_WITH_CUDA)
  trlhpc_sources(cuda_src kernels/cuda/*.cu)
  # Host C++ (g++, not nvcc: cudnn-frontend's headers compile in half the time and without nvcc's
  # warnings); the frontend's include folder and define reach this one file only (cmake/cuda.cmake).
  list(APPEND cuda_src ${PROJECT_SOURCE_DIR}/kernels/cuda/cudnn_attention.cpp)
  # With the frontend, NVRTC is linked too: the frontend's headers compile in its experimental Blackwell
  # engines, which call NVRTC (never reached from trlhpc's SDPA graphs, but referenced).
  set(cudnn_frontend_libs "")
  if(TRLHPC_WITH_CUDNN_ATTENTION)
    set_source_files_properties(${PROJECT_SOURCE_DIR}/kernels/cuda/cudnn_attention.cpp PROPERTIES
      COMPILE_DEFINITIONS TRLHPC_HAVE_CUDNN_FRONTEND=1 COMPILE_OPTIONS "-isystem;${TRLHPC_CUDNN_FRONTEND_DIR}")
    set(cudnn_frontend_libs CUDA::nvrtc)
  endif()
  trlhpc_add_area(cuda SOURCES ${cuda_src} USES core
    LIBS CUDA::cudart CUDA::cublas CUDA::cublasLt ${TRLHPC_CUDNN_LIBRARY} ${cudnn_frontend_libs})
  target_include_directories(trlhpc_cuda PUBLIC ${PROJECT_SOURCE_DIR}/kernels/cuda)
  set(cuda_area cuda)
  set(cuda_libs CUDA::cudart)
endif()

trlhpc_sources(runtime_src src/runtime/*.cpp)
trlhpc_cuda_sources(runtime_cu src/runtime/*.cu)
trlhpc_add_area(runtime SOURCES ${runtime_src} ${runtime_cu} USES core kernels ${cuda_area}
  LIBS MPI::MPI_CXX BLAS::BLAS ${HDF5_C_LIBRARIES} $<$<BOOL:${TRLHPC_WITH_CUDA}>:CUDA::cudart> ${TRLHPC_NCCL_LIBRARY}
       ${TRLHPC_CUDNN_LIBRARY})  # HDF5, NCCL, cuDNN: their versions only (library_versions)

trlhpc_sources(ops_src src/ops/*.cpp)
trlhpc_cuda_sources(ops_cu src/ops/*.cu)
trlhpc_add_area(ops SOURCES ${ops_src} ${ops_cu} USES core kernels runtime ${cuda_area} LIBS BLAS::BLAS ${cuda_libs})

# src/io/hdf5/ (parallel HDF5 over the process groups) is io by concept but needs MPI and the mesh: it
# builds into `parallel` below.
trlhpc_sources(io_src src/io/*.cpp)
list(FILTER io_src EXCLUDE REGEX "/src/io/hdf5/")
trlhpc_add_area(io SOURCES ${io_src} USES core)

trlhpc_sources(data_src src/data/*.cpp)
trlhpc_add_area(data SOURCES ${data_src} USES core io LIBS PkgConfig::PCRE2 Snappy::snappy PkgConfig::PARQUET_CODECS yaml-cpp)

# src/comm/ is two areas. `comm`: the communicator interface (types, requests) that the model's tensor
# parallelism and generate call, MPI-free, so model/ stays free of MPI. `comm_backends`: the MPI, NCCL
# and staged communicators, the watchdog, the progress thread, deadline timers and GPU sharing, which
# know nothing of meshes, models or strategies.
trlhpc_add_area(comm SOURCES src/comm/comm_types.cpp USES core)
trlhpc_sources(comm_backends_src src/comm/*.cpp)
list(REMOVE_ITEM comm_backends_src ${PROJECT_SOURCE_DIR}/src/comm/comm_types.cpp)
trlhpc_cuda_sources(comm_backends_cu src/comm/*.cu)
trlhpc_add_area(comm_backends SOURCES ${comm_backends_src} ${comm_backends_cu} USES core runtime comm ops ${cuda_area}
  LIBS MPI::MPI_CXX ${cuda_libs} ${TRLHPC_NCCL_LIBRARY})

trlhpc_sources(model_src src/model/*.cpp)
trlhpc_add_area(model SOURCES ${model_src} USES core ops io data comm)

trlhpc_sources(optim_src src/optim/*.cpp)
trlhpc_add_area(optim SOURCES ${optim_src} USES core ops model)

trlhpc_sources(parallel_src src/parallel/*.cpp src/io/hdf5/*.cpp)
trlhpc_cuda_sources(parallel_cu src/parallel/*.cu)
trlhpc_add_area(parallel SOURCES ${parallel_src} ${parallel_cu}
  USES core runtime comm comm_backends ops model optim data io ${cuda_area}
  LIBS MPI::MPI_CXX ${HDF5_C_LIBRARIES} ${cuda_libs} ${TRLHPC_NCCL_LIBRARY})

trlhpc_sources(generate_src src/generate/*.cpp)
trlhpc_add_area(generate SOURCES ${generate_src} USES core data model ops comm)

trlhpc_sources(train_src src/train/*.cpp)
trlhpc_add_area(train SOURCES ${train_src} USES core runtime ops io data model optim parallel)

trlhpc_sources(cli_src src/cli/*.cpp)
list(REMOVE_ITEM cli_src ${PROJECT_SOURCE_DIR}/src/cli/main.cpp)
trlhpc_add_area(cli SOURCES ${cli_src} USES core runtime ops io data model parallel generate train
  LIBS Boost::program_options yaml-cpp)

# Everything, for the binary, the tests and the benchmarks.
add_library(trlhpc_lib INTERFACE)
foreach(area ${TRLHPC_AREAS})
  target_link_libraries(trlhpc_lib INTERFACE trlhpc_${area})
endforeach()
