# The libraries nvdra links, as targets of our own:
#   nvdra_dep_grpc      gRPC C++ (with abseil, protobuf, c-ares, re2, zlib)
#   nvdra_dep_protobuf  protobuf (the lite runtime: our protos ask for no more)
#   nvdra_dep_yaml      yaml-cpp
#   nvdra_dep_log       spdlog and fmt
#
# With NVDRA_STATIC_DEPS (the default) they are Debian's static archives:
# the plugins then map no shared C++ library but libc's, and only the pages
# they touch of what they link become resident (see docs/benchmarks.md,
# "Footprint"). gRPC is its `_unsecure` variant: the plugins serve and call
# gRPC over Unix sockets only, so gRPC needs no TLS and no OpenSSL. spdlog
# and fmt have no static archive in Debian; their compiled parts are built
# here from the packages' own headers (src/util/spdlog_compiled.cc,
# fmt_compiled.cc). Without NVDRA_STATIC_DEPS, the packages' shared
# libraries and CMake targets are used.

# Version pins. Three pieces of the footprint work lean on what exactly
# Debian 12 ships, and are only used with the versions they were written
# for (docs/benchmarks.md, "Version pins"):
#   gRPC 1.51     src/kubelet/grpc_event_engine.*: TimerEventEngine implements
#                 gRPC's experimental EventEngine interface (it changes between
#                 releases); otherwise gRPC keeps its stock engine.
#   spdlog 1.10   src/util/spdlog_compiled.cc lists spdlog's compiled parts by
#   (fmt 9.1)     hand; otherwise spdlog and fmt are the packages' shared libs.
#   Abseil 20220623  the link group below takes every libabsl_*.a beside gRPC's
#                 archives; otherwise gRPC, protobuf and Abseil are the
#                 packages' shared libs.
# On another version the build falls back as said and warns, naming the file
# to revisit; with NVDRA_STRICT_PINS=ON it fails at configure time instead.
option(NVDRA_STRICT_PINS "Fail at configure time when gRPC, spdlog or Abseil is not the pinned version" OFF)
# (Cache entries, so -DNVDRA_PINNED_GRPC_VERSION=0 exercises a fallback.)
set(NVDRA_PINNED_GRPC_VERSION 1.51 CACHE STRING "gRPC release TimerEventEngine is written for")
set(NVDRA_PINNED_SPDLOG_VERSION 1.10 CACHE STRING "spdlog release spdlog_compiled.cc is written for")
set(NVDRA_PINNED_ABSL_VERSION 20220623 CACHE STRING "Abseil release the static link group is written for")

# True in `out` when `version` is `pinned` or a patch release of it.
function(_nvdra_check_pin out what version pinned file fallback)
  if(version VERSION_EQUAL pinned OR version MATCHES "^${pinned}(\\.|$)")
    set(${out} TRUE PARENT_SCOPE)
    return()
  endif()
  set(msg "${what} is version '${version}', not ${pinned}: revisit ${file}")
  if(NVDRA_STRICT_PINS)
    message(FATAL_ERROR "${msg} (NVDRA_STRICT_PINS)")
  endif()
  message(WARNING "${msg}; meanwhile ${fallback}")
  set(${out} FALSE PARENT_SCOPE)
endfunction()

_nvdra_check_pin(NVDRA_TIMER_EVENT_ENGINE "gRPC" "${gRPC_VERSION}" ${NVDRA_PINNED_GRPC_VERSION}
  "src/kubelet/grpc_event_engine.cc" "gRPC keeps its stock EventEngine")
_nvdra_check_pin(_spdlog_pinned "spdlog" "${spdlog_VERSION}" ${NVDRA_PINNED_SPDLOG_VERSION}
  "src/util/spdlog_compiled.cc" "spdlog and fmt are linked as the packages' shared libraries")
_nvdra_check_pin(_absl_pinned "Abseil" "${absl_VERSION}" ${NVDRA_PINNED_ABSL_VERSION}
  "cmake/NvdraDeps.cmake (the libabsl_*.a link group)"
  "gRPC, protobuf and Abseil are linked as the packages' shared libraries")

add_library(nvdra_dep_grpc INTERFACE)
add_library(nvdra_dep_protobuf INTERFACE)
add_library(nvdra_dep_yaml INTERFACE)

# The shipped binaries link libstdc++ statically only when no C++ library
# they link is shared (cmake/NvdraHelpers.cmake, nvdra_shipped_binary).
if(NVDRA_STATIC_DEPS AND _spdlog_pinned AND _absl_pinned)
  set(NVDRA_ALL_DEPS_STATIC TRUE)
else()
  set(NVDRA_ALL_DEPS_STATIC FALSE)
endif()

if(NOT NVDRA_STATIC_DEPS OR NOT _spdlog_pinned)
  add_library(nvdra_dep_log INTERFACE)
  target_link_libraries(nvdra_dep_log INTERFACE spdlog::spdlog fmt::fmt)
endif()
if(NOT NVDRA_STATIC_DEPS OR NOT _absl_pinned)
  target_link_libraries(nvdra_dep_grpc INTERFACE gRPC::grpc++)
  target_link_libraries(nvdra_dep_protobuf INTERFACE protobuf::libprotobuf)
endif()

if(NOT NVDRA_STATIC_DEPS)
  target_link_libraries(nvdra_dep_yaml INTERFACE yaml-cpp)
  return()
endif()

function(_nvdra_static_archive out name)
  find_library(_nvdra_a_${name} NAMES lib${name}.a REQUIRED NO_CACHE)
  set(${out} ${_nvdra_a_${name}} PARENT_SCOPE)
endfunction()

if(_absl_pinned)
  set(_grpc_archives)
  foreach(lib grpc++_unsecure grpc_unsecure gpr upb address_sorting cares re2 z)
    _nvdra_static_archive(a ${lib})
    list(APPEND _grpc_archives ${a})
    if(lib STREQUAL "gpr")
      get_filename_component(_absl_dir ${a} DIRECTORY)
    endif()
  endforeach()
  # Every abseil archive: gRPC's own list of them differs between releases,
  # and a link group resolves the ones it needs in any order.
  file(GLOB _absl_archives ${_absl_dir}/libabsl_*.a)
  if(NOT _absl_archives)
    message(FATAL_ERROR "NVDRA_STATIC_DEPS: no libabsl_*.a in ${_absl_dir} (libabsl-dev)")
  endif()
  _nvdra_static_archive(_protobuf_a protobuf-lite)
  target_link_libraries(nvdra_dep_protobuf INTERFACE ${_protobuf_a} Threads::Threads)
  target_link_libraries(nvdra_dep_grpc INTERFACE
    "-Wl,--start-group" ${_grpc_archives} ${_absl_archives} ${_protobuf_a} "-Wl,--end-group"
    Threads::Threads m rt dl)
endif()

_nvdra_static_archive(_yaml_a yaml-cpp)
target_link_libraries(nvdra_dep_yaml INTERFACE ${_yaml_a})
get_target_property(_yaml_inc yaml-cpp INTERFACE_INCLUDE_DIRECTORIES)
if(_yaml_inc)
  target_include_directories(nvdra_dep_yaml SYSTEM INTERFACE ${_yaml_inc})
endif()

if(_spdlog_pinned)
  add_library(nvdra_dep_log STATIC
    ${PROJECT_SOURCE_DIR}/src/util/spdlog_compiled.cc
    ${PROJECT_SOURCE_DIR}/src/util/fmt_compiled.cc)
  # The same definitions as the packages' targets, so objects compile alike in
  # both modes (the visibility they add is harmless in a static archive).
  target_compile_definitions(nvdra_dep_log PUBLIC
    SPDLOG_SHARED_LIB SPDLOG_COMPILED_LIB SPDLOG_FMT_EXTERNAL FMT_SHARED)
  target_link_libraries(nvdra_dep_log PUBLIC Threads::Threads)
  target_compile_options(nvdra_dep_log PRIVATE -w)
endif()
