# The AMD kernels' costs from their compiled code (simulator/amd_code.h): each kernel file the
# models read is compiled device-only to assembly, gfx950 by clang-22 and gfx942 by clang-19 (the
# flags of tests/cli_gpu_compile.sh and FACTS.md), and cmake/amd_asm_costs.c reads every kernel's
# registers, LDS, scratch and hot loop from it (llvm-mca-22 giving its second opinion on each loop's
# cycles) into ${TL_AMD_CODE_C}, which the library compiles. Both clangs and llvm-mca-22 are
# required: without them the model of the AMD kernels would not be the kernels' own, so the
# configure step stops and names the package (scripts/setup.sh installs them).
# Cost: about 15 s of one core a arch for the six files, run in parallel with the rest of the build.
find_program(TL_CLANG22 clang++-22)
find_program(TL_CLANG19 clang++-19)
find_program(TL_LLVM_MCA22 llvm-mca-22)
foreach(tool TL_CLANG22:clang-22 TL_CLANG19:clang-19 TL_LLVM_MCA22:llvm-22)
  string(REPLACE ":" ";" pair ${tool})
  list(GET pair 0 var)
  list(GET pair 1 pkg)
  if(NOT ${var})
    message(FATAL_ERROR "${var} not found: the MI355X / MI300X models read the kernels' own gfx950 / gfx942 "
                        "assembly; install the Debian package ${pkg} (or run scripts/setup.sh)")
  endif()
endforeach()

# the kernel files whose instances the models look up (simulator/*.c name them)
set(TL_AMD_CODE_FILES indexer prefill decode_paged decode_mla topk_kernels moe_gemm)
file(GLOB TL_AMD_CODE_DEPS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/*.h ${CMAKE_SOURCE_DIR}/contract/*.h
     ${CMAKE_SOURCE_DIR}/numerics/*.h ${CMAKE_SOURCE_DIR}/core/*.h)
set(TL_AMD_CODE_ASM "")
set(TL_AMD_CODE_SPECS "")
foreach(arch gfx950 gfx942)
  if(arch STREQUAL "gfx950")
    set(cc ${TL_CLANG22})
    set(extra -D__AMDGCN_WAVEFRONT_SIZE=64)
  else()
    set(cc ${TL_CLANG19})
    set(extra "")
  endif()
  foreach(f ${TL_AMD_CODE_FILES})
    set(s ${CMAKE_BINARY_DIR}/amd/${arch}/${f}.s)
    add_custom_command(OUTPUT ${s}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/amd/${arch}
      COMMAND ${cc} -std=c++17 -x hip --offload-arch=${arch} --rocm-path=/usr -nogpulib --cuda-device-only
              -O3 -S -w -I${CMAKE_SOURCE_DIR} ${extra} ${CMAKE_SOURCE_DIR}/kernels/${f}.hip -o ${s}
      DEPENDS ${CMAKE_SOURCE_DIR}/kernels/${f}.hip ${TL_AMD_CODE_DEPS}
      COMMENT "Compiling kernels/${f}.hip for ${arch} (assembly for the model)" VERBATIM)
    list(APPEND TL_AMD_CODE_ASM ${s})
    list(APPEND TL_AMD_CODE_SPECS ${arch}:kernels/${f}.hip:${s})
  endforeach()
endforeach()

add_executable(tl_amd_asm_costs ${CMAKE_SOURCE_DIR}/cmake/amd_asm_costs.c ${CMAKE_SOURCE_DIR}/simulator/amd_code.c
               ${CMAKE_SOURCE_DIR}/core/tl.c)
target_include_directories(tl_amd_asm_costs PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(tl_amd_asm_costs PRIVATE m)
set(TL_AMD_CODE_C ${CMAKE_BINARY_DIR}/generated/amd_code_data.c)
add_custom_command(OUTPUT ${TL_AMD_CODE_C}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/generated
  COMMAND tl_amd_asm_costs --out ${TL_AMD_CODE_C} --mca ${TL_LLVM_MCA22} ${TL_AMD_CODE_SPECS}
  DEPENDS tl_amd_asm_costs ${TL_AMD_CODE_ASM}
  COMMENT "Reading the AMD kernels' costs from their assembly" VERBATIM)
