# CUDA backend detection: TRLHPC_CUDA=ON requires nvcc, AUTO uses it when present, OFF skips it.
# The CUDA build links cudart/cuBLASLt/NCCL/cuDNN but must still run where no GPU (or driver) exists:
# every entry point asks cudaGetDeviceCount first and treats failure as "no GPU".
set(TRLHPC_WITH_CUDA OFF)
if(NOT TRLHPC_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(TRLHPC_WITH_CUDA ON)
  elseif(TRLHPC_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TRLHPC_CUDA=ON but no CUDA compiler (nvcc) was found; install the CUDA toolkit or use -DTRLHPC_CUDA=OFF")
  endif()
endif()

if(TRLHPC_WITH_CUDA)
  # A100 and H100/H200 by default; CMake's CUDAARCHS environment variable (or -DCMAKE_CUDA_ARCHITECTURES)
  # chooses others. CI compiles one (.ci/run): every .cu still compiles and links, in 2/3 of the time.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 cannot pass C++20 to nvcc; device code needs only 17
  find_package(CUDAToolkit REQUIRED)
  find_library(TRLHPC_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
  find_library(TRLHPC_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
  # cuDNN's fused attention (kernels/cuda/cudnn_attention.cpp) is written against cudnn-frontend, the
  # header-only C++ graph API (MIT; PyPI's nvidia-cudnn-frontend installs it under site-packages/include).
  # Optional: without it that file compiles to stubs and the hand-written kernel is the only attention.
  # The raw backend API (cudnn_graph.h) would need the SDPA graph spelled out op by op (dozens of
  # descriptors for the backward alone), which is what the frontend exists to do.
  option(TRLHPC_CUDNN_ATTENTION "Build cuDNN fused attention when cudnn-frontend's headers are found" ON)
  set(TRLHPC_CUDNN_FRONTEND_INCLUDE "" CACHE PATH "folder holding cudnn_frontend.h (empty: python3's site-packages/include)")
  set(TRLHPC_WITH_CUDNN_ATTENTION OFF)
  if(TRLHPC_CUDNN_ATTENTION)
    set(trlhpc_site_include "")
    find_program(TRLHPC_PYTHON3 python3)
    if(TRLHPC_PYTHON3)
      execute_process(COMMAND ${TRLHPC_PYTHON3} -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        OUTPUT_VARIABLE trlhpc_site OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE trlhpc_site_rc)
      if(trlhpc_site_rc EQUAL 0 AND trlhpc_site)
        set(trlhpc_site_include ${trlhpc_site}/include)
      endif()
    endif()
    find_path(TRLHPC_CUDNN_FRONTEND_DIR cudnn_frontend.h HINTS ${TRLHPC_CUDNN_FRONTEND_INCLUDE} ${trlhpc_site_include})
    if(TRLHPC_CUDNN_FRONTEND_DIR)
      set(TRLHPC_WITH_CUDNN_ATTENTION ON)
      message(STATUS "trlhpc: cuDNN fused attention ON (cudnn-frontend in ${TRLHPC_CUDNN_FRONTEND_DIR})")
    else()
      message(STATUS "trlhpc: cuDNN fused attention OFF (no cudnn_frontend.h; pip install nvidia-cudnn-frontend)")
    endif()
  endif()
  # The .cu files join their areas' targets (cmake/areas.cmake): kernels/cuda is the `cuda` area,
  # src/ops/*.cu (CudaOps) is in `ops`, src/parallel/*.cu (NCCL) in `parallel`, src/runtime/*.cu in `runtime`.
  message(STATUS "trlhpc: CUDA backend ON (architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "trlhpc: CUDA backend OFF")
endif()
