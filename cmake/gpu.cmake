# The GPU layer (kernels/*.hip), built when TILELAB_GPU is cuda or hip; included by the top
# CMakeLists.txt, which links the target tilelab_gpu into `tilelab` and defines
# TILELAB_HAVE_GPU=1 for the cli sources when the target exists.
#   -DTILELAB_GPU=off   nothing (the default; CI)
#   -DTILELAB_GPU=cuda  nvcc compiles kernels/*.hip as CUDA; CMAKE_CUDA_ARCHITECTURES default 90a
#                       (Hopper with its wgmma, kernels/wgmma.h; TL_HAVE_WGMMA=1 tells the host
#                       code that those kernels exist). Plain 90 or 80/89 build the mma.sync paths.
#   -DTILELAB_GPU=hip   hipcc / clang compiles them as HIP; CMAKE_HIP_ARCHITECTURES default
#                       gfx950;gfx942 (needs ROCm 6.4+ or LLVM 20 for gfx950). On Debian 12
#                       packages (clang-19, HIP 5.2) only gfx942 compiles: pass
#                       -DCMAKE_HIP_ARCHITECTURES=gfx942 (TILELAB_HIP_LAYOUT=debian).
string(TOLOWER "${TILELAB_GPU}" TL_GPU_MODE)
file(GLOB TL_GPU_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/*.hip)

if(TL_GPU_MODE STREQUAL "off" OR TL_GPU_MODE STREQUAL "")
  return()
elseif(TL_GPU_MODE STREQUAL "cuda")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90a)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set_source_files_properties(${TL_GPU_SOURCES} PROPERTIES LANGUAGE CUDA)
  add_library(tilelab_gpu STATIC ${TL_GPU_SOURCES})
  target_compile_options(tilelab_gpu PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-x cu -lineinfo -Xptxas=-warn-spills>)
  if("90a" IN_LIST CMAKE_CUDA_ARCHITECTURES)
    target_compile_definitions(tilelab_gpu PRIVATE TL_HAVE_WGMMA=1)
  endif()
  find_package(CUDAToolkit REQUIRED)
  target_link_libraries(tilelab_gpu PUBLIC CUDA::cudart_static)
elseif(TL_GPU_MODE STREQUAL "hip")
  if(NOT DEFINED CMAKE_HIP_ARCHITECTURES)
    set(CMAKE_HIP_ARCHITECTURES "gfx950;gfx942")
  endif()
  # Two HIP layouts (TILELAB_HIP_LAYOUT; auto picks rocm when ROCm's CMake package is there):
  #   rocm    a ROCm install (/opt/rocm or $ROCM_PATH): CMake's HIP language + hip-config.cmake.
  #   debian  Debian's packages (libamdhip64-dev, rocm-device-libs, clang-N, lld-N): CMake 3.25
  #           cannot use them (it looks for hip-lang only in <root>/lib/cmake, CMake issue 24562;
  #           hip-config.cmake wants /usr/bin/hipcc, whose clang 15 cannot target gfx942), so
  #           clang compiles kernels/*.hip itself in custom commands (below).
  set(TILELAB_HIP_LAYOUT "auto" CACHE STRING "HIP toolchain layout: auto, rocm or debian")
  set_property(CACHE TILELAB_HIP_LAYOUT PROPERTY STRINGS auto rocm debian)
  set(TL_HIP_LAYOUT "${TILELAB_HIP_LAYOUT}")
  if(TL_HIP_LAYOUT STREQUAL "auto")
    if(CMAKE_HIP_COMPILER_ROCM_ROOT
       OR (NOT "$ENV{ROCM_PATH}" STREQUAL "" AND EXISTS "$ENV{ROCM_PATH}/lib/cmake/hip-lang/hip-lang-config.cmake")
       OR EXISTS /opt/rocm/lib/cmake/hip-lang/hip-lang-config.cmake)
      set(TL_HIP_LAYOUT rocm)
    else()
      set(TL_HIP_LAYOUT debian)
    endif()
  endif()
  if(TL_HIP_LAYOUT STREQUAL "rocm")
    enable_language(HIP)
    set_source_files_properties(${TL_GPU_SOURCES} PROPERTIES LANGUAGE HIP)
    add_library(tilelab_gpu STATIC ${TL_GPU_SOURCES})
    find_package(hip REQUIRED)
    target_link_libraries(tilelab_gpu PUBLIC hip::host)
  elseif(TL_HIP_LAYOUT STREQUAL "debian")
    # The compiler: CMAKE_HIP_COMPILER if given (a name or a path), else the newest clang++-N.
    find_program(TL_HIP_CLANG NAMES ${CMAKE_HIP_COMPILER} clang++-21 clang++-20 clang++-19)
    # The HIP runtime (libamdhip64-dev): headers under <root>/include/hip, root passed to clang.
    find_path(TL_HIP_INCLUDE hip/hip_runtime.h PATHS /usr/include)
    find_library(TL_AMDHIP64 amdhip64)
    # The ROCm device libraries (rocm-device-libs): HIP 5.2's headers implement threadIdx,
    # blockDim, __syncthreads and __threadfence through ockl.bc and hip.bc. The package has no
    # oclc_isa_version_942.bc, so clang's default set cannot be used; exactly these are linked,
    # and only the functions the kernels reference are pulled in: ockl, hip, and the wave size
    # that ockl reads (64: every gfx9 target; without optimisation the read is not folded away
    # and a Debug build's link misses __oclc_wavefrontsize64). No ocml (math): kernels use
    # __builtin_* math on AMD.
    find_path(TL_HIP_BITCODE ockl.bc PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode
              /usr/lib/amdgcn/bitcode /usr/amdgcn/bitcode NO_DEFAULT_PATH)
    foreach(v TL_HIP_CLANG:clang-19 TL_HIP_INCLUDE:libamdhip64-dev TL_AMDHIP64:libamdhip64-dev
              TL_HIP_BITCODE:rocm-device-libs)
      string(REPLACE ":" ";" v "${v}")
      list(GET v 0 var)
      list(GET v 1 pkg)
      if(NOT ${var})
        message(FATAL_ERROR "TILELAB_GPU=hip (Debian layout): ${var} not found: install the Debian "
                "package ${pkg}")
      endif()
    endforeach()
    # The device link runs ld.lld from clang's own folder first, else the one on PATH (Debian's
    # default lld-14: "unknown emulation: elf64_amdgpu"): the matching lld-N must be there.
    get_filename_component(TL_HIP_CLANG_DIR "${TL_HIP_CLANG}" REALPATH)
    get_filename_component(TL_HIP_CLANG_DIR "${TL_HIP_CLANG_DIR}" DIRECTORY)
    if(NOT EXISTS "${TL_HIP_CLANG_DIR}/ld.lld")
      message(FATAL_ERROR "TILELAB_GPU=hip (Debian layout): ${TL_HIP_CLANG_DIR}/ld.lld not found: "
              "install the lld package of the same version as ${TL_HIP_CLANG} (lld-19 for clang-19)")
    endif()
    # clang bundles each object's device code with clang-offload-bundler from its own folder, which
    # Debian ships in clang-tools-N (only a recommendation of clang-N)
    if(NOT EXISTS "${TL_HIP_CLANG_DIR}/clang-offload-bundler")
      message(FATAL_ERROR "TILELAB_GPU=hip (Debian layout): ${TL_HIP_CLANG_DIR}/clang-offload-bundler not "
              "found: install the clang-tools package of the same version as ${TL_HIP_CLANG} (clang-tools-19)")
    endif()
    get_filename_component(TL_HIP_ROOT "${TL_HIP_INCLUDE}" DIRECTORY)
    # Each architecture must be one this clang knows (clang-19: gfx942 yes, gfx950 no).
    set(TL_HIP_ARCH_FLAGS "")
    foreach(arch IN LISTS CMAKE_HIP_ARCHITECTURES)
      execute_process(COMMAND ${TL_HIP_CLANG} -x hip --offload-arch=${arch} --cuda-device-only
                      -nogpulib -fsyntax-only /dev/null
                      RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${TL_HIP_CLANG} cannot target ${arch} (gfx950 needs LLVM 20 or "
                "ROCm 6.4+): pass -DCMAKE_HIP_ARCHITECTURES=gfx942\n${err}")
      endif()
      list(APPEND TL_HIP_ARCH_FLAGS --offload-arch=${arch})
    endforeach()
    string(TOUPPER "${CMAKE_BUILD_TYPE}" bt)
    separate_arguments(TL_HIP_BT_FLAGS UNIX_COMMAND "${CMAKE_CXX_FLAGS_${bt}}")
    set(TL_HIP_FLAGS -x hip -std=c++17 -fPIC ${TL_HIP_BT_FLAGS} ${TL_HIP_ARCH_FLAGS}
        --rocm-path=${TL_HIP_ROOT} --rocm-device-lib-path=${TL_HIP_BITCODE}
        --hip-device-lib=hip.bc --hip-device-lib=ockl.bc --hip-device-lib=oclc_wavefrontsize64_on.bc
        -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -I${CMAKE_SOURCE_DIR}
        # the host pass sees static __device__ helpers that only kernels call: not unused
        -Xarch_host -Wno-unused-function -Xarch_host -Wno-unneeded-internal-declaration)
    set(TL_HIP_OBJECTS "")
    foreach(src IN LISTS TL_GPU_SOURCES)
      get_filename_component(name "${src}" NAME_WE)
      set(obj ${CMAKE_CURRENT_BINARY_DIR}/tilelab_gpu_hip/${name}.o)
      add_custom_command(OUTPUT ${obj}
        COMMAND ${TL_HIP_CLANG} ${TL_HIP_FLAGS} -MD -MF ${obj}.d -c ${src} -o ${obj}
        DEPENDS ${src}
        DEPFILE ${obj}.d
        COMMENT "Building HIP object kernels/${name}.hip (${CMAKE_HIP_ARCHITECTURES})"
        VERBATIM)
      list(APPEND TL_HIP_OBJECTS ${obj})
    endforeach()
    file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/tilelab_gpu_hip)
    set_source_files_properties(${TL_HIP_OBJECTS} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
    add_library(tilelab_gpu STATIC ${TL_HIP_OBJECTS})
    set_target_properties(tilelab_gpu PROPERTIES LINKER_LANGUAGE CXX)
    target_link_libraries(tilelab_gpu PUBLIC ${TL_AMDHIP64})
  else()
    message(FATAL_ERROR "TILELAB_HIP_LAYOUT='${TILELAB_HIP_LAYOUT}' is not one of auto, rocm, debian")
  endif()
else()
  message(FATAL_ERROR "TILELAB_GPU='${TILELAB_GPU}' is not one of off, cuda, hip")
endif()

target_include_directories(tilelab_gpu PUBLIC ${CMAKE_SOURCE_DIR})
# kernels call the C API of core/ (tl_error, tl_rng)
target_link_libraries(tilelab_gpu PUBLIC tilelab_lib)
set_target_properties(tilelab_gpu PROPERTIES POSITION_INDEPENDENT_CODE ON)
