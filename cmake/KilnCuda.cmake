# KILN_WITH_CUDA=AUTO turns CUDA on when a toolkit is found (/usr/local/cuda or nvcc on PATH), so
# CI compiles the CUDA code even though it has no GPU. Sets KILN_CUDA_ENABLED.
# KILN_WITH_CUDA=ON (what .ci/run asks for) fails the configure when no toolkit is found, so "the
# CUDA code compiles in CI" is enforced, not assumed.
set(KILN_CUDA_ENABLED OFF)
if(KILN_WITH_CUDA STREQUAL "AUTO" OR KILN_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(_kiln_nvcc nvcc PATHS /usr/local/cuda/bin NO_CACHE)
    if(_kiln_nvcc)
      set(CMAKE_CUDA_COMPILER ${_kiln_nvcc})
    endif()
  endif()
  if(CMAKE_CUDA_COMPILER)
    set(KILN_CUDA_ENABLED ON)
  elseif(NOT KILN_WITH_CUDA STREQUAL "AUTO")
    message(FATAL_ERROR "kiln: KILN_WITH_CUDA=${KILN_WITH_CUDA} but no CUDA toolkit was found "
                        "(nvcc on PATH or in /usr/local/cuda/bin)")
  endif()
endif()

if(KILN_CUDA_ENABLED)
  # SASS for every supported GPU generation plus PTX for the newest, so no supported GPU JITs at load.
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 75-real 80-real 86-real 89-real 90-real 90-virtual)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 does not know nvcc's C++20 flag
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "kiln: CUDA enabled (${CMAKE_CUDA_COMPILER}), architectures ${CMAKE_CUDA_ARCHITECTURES}")
else()
  message(STATUS "kiln: CUDA disabled (KILN_WITH_CUDA=${KILN_WITH_CUDA})")
endif()
