# npf_bpf_skeleton(<name> <source.bpf.c>)
# Compiles a BPF C file with clang (header dependencies tracked through a
# depfile) and generates <name>.skel.h with bpftool. Defines the INTERFACE
# target <name>_skel that puts the skeleton on the include path.
find_program(NPF_CLANG NAMES clang clang-16 clang-15 clang-14 REQUIRED)
find_program(NPF_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)

execute_process(COMMAND ${CMAKE_C_COMPILER} -print-multiarch
                OUTPUT_VARIABLE NPF_MULTIARCH OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT NPF_MULTIARCH)
  set(NPF_MULTIARCH "${CMAKE_LIBRARY_ARCHITECTURE}")
endif()

function(npf_bpf_skeleton name src)
  set(obj ${CMAKE_CURRENT_BINARY_DIR}/${name}.bpf.o)
  set(skel ${CMAKE_CURRENT_BINARY_DIR}/gen/${name}.skel.h)
  set(dep ${CMAKE_CURRENT_BINARY_DIR}/${name}.bpf.d)
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${NPF_CLANG} -target bpf -O2 -g -mcpu=v3 -Wall -Werror
            -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR}/bpf
            -I/usr/include/${NPF_MULTIARCH}
            -MD -MF ${dep} -c ${CMAKE_CURRENT_SOURCE_DIR}/${src} -o ${obj}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${src}
    DEPFILE ${dep}
    COMMENT "BPF ${src}"
    VERBATIM)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/gen
    COMMAND ${NPF_BPFTOOL} gen skeleton ${obj} name ${name} > ${skel}
    DEPENDS ${obj}
    COMMENT "skeleton ${name}.skel.h"
    VERBATIM)
  add_custom_target(${name}_skel_gen DEPENDS ${skel})
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_skel_gen)
  target_include_directories(${name}_skel INTERFACE ${CMAKE_CURRENT_BINARY_DIR}/gen)
endfunction()
