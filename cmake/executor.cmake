# The CPU executor of the AMD kernels (executor/, `--device emu:gfx942|gfx950`), in every build.
# Each kernels/*.hip is compiled twice as host C++ by clang++ (the AMD paths use clang's vector
# types), once with -D__gfx942__ and once with -D__gfx950__, and TL_GPU_EMU (kernels/gpu.h then
# includes executor/hip_emu.h). A target's objects are linked into one relocatable object whose
# symbols are all made local but the op tables (TL_GPU_EXPORT) and the runtime's calls, so the two
# targets' copies of the same kernels, and a GPU build's, live side by side in one binary.
# Needs: clang++ (clang-19, scripts/setup.sh), ld and objcopy (binutils), Boost.Context
# (libboost-context-dev). Cost: about a minute of clang on two cores per target.
find_program(TL_EMU_CXX NAMES clang++-19 clang++-22 clang++)
find_program(TL_EMU_LD NAMES ld)
find_program(TL_EMU_OBJCOPY NAMES objcopy)
find_path(TL_BOOST_CONTEXT_INCLUDE boost/context/detail/fcontext.hpp)
find_library(TL_BOOST_CONTEXT_LIB boost_context)
foreach(v TL_EMU_CXX:clang-19 TL_EMU_LD:binutils TL_EMU_OBJCOPY:binutils
          TL_BOOST_CONTEXT_INCLUDE:libboost-context-dev TL_BOOST_CONTEXT_LIB:libboost-context-dev)
  string(REPLACE ":" ";" v "${v}")
  list(GET v 0 var)
  list(GET v 1 pkg)
  if(NOT ${var})
    message(FATAL_ERROR "the CPU executor needs ${var}: install the Debian package ${pkg} (or run scripts/setup.sh)")
  endif()
endforeach()
find_package(OpenMP REQUIRED COMPONENTS CXX)

file(GLOB TL_EMU_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/*.hip)
set(TL_EMU_FLAGS -x c++ -std=c++17 -fPIC -fvisibility=hidden -gline-tables-only -DTL_GPU_EMU=1 -D_GNU_SOURCE
    -I${CMAKE_SOURCE_DIR} -Wall -Wextra -Wno-unused-parameter -Wno-unused-function -Wno-unused-variable
    -Wno-unneeded-internal-declaration -Wno-unused-private-field -Wno-unknown-pragmas)
if(TILELAB_SANITIZE)
  # clang's -fsanitize=function has no handler in gcc's libubsan, which the binary links
  list(APPEND TL_EMU_FLAGS -O1 -fsanitize=address,undefined -fno-sanitize=function -fno-sanitize-recover=all
       -fno-omit-frame-pointer)
else()
  list(APPEND TL_EMU_FLAGS -O2)
endif()
set(TL_EMU_OBJECTS "")
# The mutant (release builds only): gfx950's kernels with TL_EMU_MUTANT, two deliberate bugs
# (kernels/mma.h: B's lane mapping; kernels/quant.hip: a missing barrier) whose checks must fail;
# linked into tilelab-mutant (tests/cli_executor.sh), never into tilelab.
set(TL_EMU_VARIANTS gfx942 gfx950)
if(NOT TILELAB_SANITIZE)
  list(APPEND TL_EMU_VARIANTS gfx950-mutant)
endif()
foreach(variant IN LISTS TL_EMU_VARIANTS)
  string(REPLACE "-mutant" "" arch "${variant}")
  set(extra "")
  if(NOT variant STREQUAL arch)
    set(extra -DTL_EMU_MUTANT=1)
  endif()
  set(objs "")
  foreach(src IN LISTS TL_EMU_SOURCES)
    get_filename_component(name "${src}" NAME_WE)
    set(obj ${CMAKE_BINARY_DIR}/executor/${variant}/${name}.o)
    add_custom_command(OUTPUT ${obj}
      COMMAND ${TL_EMU_CXX} ${TL_EMU_FLAGS} -D__${arch}__=1 ${extra} -MD -MF ${obj}.d -c ${src} -o ${obj}
      DEPENDS ${src}
      DEPFILE ${obj}.d
      COMMENT "Building the executor's kernels/${name}.hip (${variant})"
      VERBATIM)
    list(APPEND objs ${obj})
  endforeach()
  set(whole ${CMAKE_BINARY_DIR}/executor/kernels_${variant}.o)
  add_custom_command(OUTPUT ${whole}
    COMMAND ${TL_EMU_LD} -r --force-group-allocation -o ${whole}.all.o ${objs}
    COMMAND ${TL_EMU_OBJCOPY} --localize-hidden ${whole}.all.o ${whole}
    DEPENDS ${objs}
    COMMENT "Linking the executor's ${arch} kernels"
    VERBATIM)
  if(variant STREQUAL arch)
    list(APPEND TL_EMU_OBJECTS ${whole})
  else()
    set(TL_EMU_MUTANT_OBJECT ${whole})
  endif()
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/executor/${variant})
endforeach()
set_source_files_properties(${TL_EMU_OBJECTS} ${TL_EMU_MUTANT_OBJECT} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)

add_library(tilelab_executor STATIC ${CMAKE_SOURCE_DIR}/executor/runtime.cpp ${CMAKE_SOURCE_DIR}/executor/amdgcn.c
            ${TL_EMU_OBJECTS})
set_target_properties(tilelab_executor PROPERTIES LINKER_LANGUAGE CXX)
target_include_directories(tilelab_executor PRIVATE ${TL_BOOST_CONTEXT_INCLUDE})
target_link_libraries(tilelab_executor PUBLIC tilelab_lib ${TL_BOOST_CONTEXT_LIB} OpenMP::OpenMP_CXX ${CMAKE_DL_LIBS} stdc++)
set_source_files_properties(${CMAKE_SOURCE_DIR}/executor/amdgcn.c PROPERTIES COMPILE_OPTIONS "-O3")
