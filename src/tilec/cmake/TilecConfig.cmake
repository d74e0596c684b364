# TilecConfig.cmake -- the CMake package of tilec (find_package(Tilec)).
#
#   find_package(Tilec REQUIRED)     # with -DTilec_DIR="$(tilec --cmake-dir)"
#   add_library(kernels STATIC)
#   tilec_add_kernels(TARGET kernels SOURCES gemm.tile softmax.tile ARCH sm_90a
#                     DEFINES block_M=64 HEADERS)
#   add_executable(app main.cpp)
#   target_link_libraries(app PRIVATE kernels)   # main.cpp can #include "gemm.h"
#
# One custom command per .tile file runs `tilec build ... -MD`; its depfile lists
# every .tile the output was built from (imports included), so editing an
# imported file regenerates exactly the files that import it.
#
# Variables: TILEC_EXECUTABLE (the tilec program; found next to this package's
# Python environment or on PATH), TILEC_ARCH (default ARCH, sm_80),
# TILEC_VERSION. Needs CMake >= 3.20 (DEPFILE with the Makefile generators).

if(CMAKE_VERSION VERSION_LESS 3.20)
  message(FATAL_ERROR "Tilec needs CMake 3.20 or newer (DEPFILE support); this is ${CMAKE_VERSION}")
endif()

include("${CMAKE_CURRENT_LIST_DIR}/TilecConfigVersion.cmake")
set(TILEC_VERSION "${PACKAGE_VERSION}")
set(Tilec_VERSION "${PACKAGE_VERSION}")

# This file lives in <prefix>/lib/pythonX.Y/site-packages/tilec/cmake when
# installed with pip, so the matching tilec script is in <prefix>/bin.
# In a checkout (src/tilec/cmake) the Makefile's .venv/bin is the place.
get_filename_component(_tilec_prefix "${CMAKE_CURRENT_LIST_DIR}/../../../../.." ABSOLUTE)
get_filename_component(_tilec_checkout "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
find_program(TILEC_EXECUTABLE tilec
  HINTS "${_tilec_prefix}/bin" "${_tilec_prefix}/Scripts" "${_tilec_checkout}/.venv/bin"
  DOC "The tilec compiler")
unset(_tilec_prefix)
unset(_tilec_checkout)
if(NOT TILEC_EXECUTABLE)
  message(FATAL_ERROR "Tilec: the tilec program was not found; pip install tilec, or set TILEC_EXECUTABLE")
endif()
set(TILEC_ARCH "sm_80" CACHE STRING "Default GPU architecture for tilec_add_kernels (sm_80, sm_86, sm_89, sm_90a)")

# tilec_add_kernels(TARGET <target> SOURCES <a.tile>... [ARCH <sm_XX>]
#                   [DEFINES <NAME=VALUE>...] [HEADERS] [OUTPUT_DIR <dir>] [OPTIONS <flag>...]
#                   [TUNED <name.tune.json>...])
#
# Generates <dir>/<name>.cu (and <name>.h with HEADERS) for each source and adds
# the .cu files to <target>, which must exist and enable the CUDA language.
# <dir> defaults to ${CMAKE_CURRENT_BINARY_DIR}/<target>_tilec; with HEADERS it
# is a PUBLIC include directory of <target>. The generated code is written for
# one GPU architecture, so <target>'s CUDA_ARCHITECTURES becomes ARCH's (sm_90a
# -> 90a); giving one target two different ARCHs is an error. A source <name>.tile
# is built with `--tuned <name>.tune.json` when TUNED lists a file of that name
# (written by `tilec tune`); the output depends on it.
function(tilec_add_kernels)
  cmake_parse_arguments(PARSE_ARGV 0 arg "HEADERS" "TARGET;ARCH;OUTPUT_DIR" "SOURCES;DEFINES;OPTIONS;TUNED")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tilec_add_kernels: unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_TARGET OR NOT TARGET "${arg_TARGET}")
    message(FATAL_ERROR "tilec_add_kernels: TARGET must name an existing target (got '${arg_TARGET}')")
  endif()
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "tilec_add_kernels(TARGET ${arg_TARGET}): no SOURCES")
  endif()
  if(NOT arg_ARCH)
    set(arg_ARCH "${TILEC_ARCH}")
  endif()
  if(NOT arg_OUTPUT_DIR)
    set(arg_OUTPUT_DIR "${CMAKE_CURRENT_BINARY_DIR}/${arg_TARGET}_tilec")
  endif()
  get_filename_component(out_dir "${arg_OUTPUT_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  file(MAKE_DIRECTORY "${out_dir}")

  set(flags --arch "${arg_ARCH}")
  foreach(define IN LISTS arg_DEFINES)
    list(APPEND flags -D "${define}")
  endforeach()
  list(APPEND flags ${arg_OPTIONS})

  set(generated)
  foreach(src IN LISTS arg_SOURCES)
    get_filename_component(src "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    get_filename_component(name "${src}" NAME_WE)
    set(cu "${out_dir}/${name}.cu")
    set(outputs "${cu}")
    set(header_flags)
    if(arg_HEADERS)
      list(APPEND outputs "${out_dir}/${name}.h")
      set(header_flags --header "${out_dir}/${name}.h")
    endif()
    set(tuned_flags)
    set(tuned_deps)
    foreach(tuned IN LISTS arg_TUNED)
      get_filename_component(tuned "${tuned}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      get_filename_component(tuned_name "${tuned}" NAME)
      if(tuned_name STREQUAL "${name}.tune.json")
        set(tuned_flags --tuned "${tuned}")
        set(tuned_deps "${tuned}")
      endif()
    endforeach()
    file(RELATIVE_PATH shown "${CMAKE_SOURCE_DIR}" "${src}")
    add_custom_command(
      OUTPUT ${outputs}
      COMMAND "${TILEC_EXECUTABLE}" build "${src}" -o "${cu}" ${header_flags} ${flags} ${tuned_flags}
              -MD -MF "${out_dir}/${name}.d"
      DEPENDS "${src}" ${tuned_deps}
      DEPFILE "${out_dir}/${name}.d"
      COMMENT "tilec ${shown} -> ${name}.cu"
      VERBATIM)
    list(APPEND generated ${outputs})
  endforeach()

  target_sources("${arg_TARGET}" PRIVATE ${generated})
  if(arg_HEADERS)
    target_include_directories("${arg_TARGET}" PUBLIC "$<BUILD_INTERFACE:${out_dir}>")
  endif()
  get_target_property(previous "${arg_TARGET}" TILEC_ARCH)
  if(previous AND NOT previous STREQUAL arg_ARCH)
    message(FATAL_ERROR "tilec_add_kernels: ${arg_TARGET} already has kernels for ${previous}, not ${arg_ARCH}; "
                        "use one target per architecture")
  endif()
  string(REGEX REPLACE "^sm_" "" cuda_arch "${arg_ARCH}")
  set_target_properties("${arg_TARGET}" PROPERTIES TILEC_ARCH "${arg_ARCH}" CUDA_ARCHITECTURES "${cuda_arch}")
endfunction()
