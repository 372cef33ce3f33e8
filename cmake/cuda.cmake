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
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 cannot pass C++20 to nvcc; device code needs only 17
  find_package(CUDAToolkit REQUIRED)
  find_library(TRLHPC_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
  find_library(TRLHPC_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
  # The .cu files join their areas' targets (cmake/areas.cmake): kernels/cuda is the `cuda` area,
  # src/ops/*.cu (CudaOps) is in `ops`, src/parallel/*.cu (NCCL) in `parallel`, src/runtime/*.cu in `runtime`.
  message(STATUS "trlhpc: CUDA backend ON (architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "trlhpc: CUDA backend OFF")
endif()
