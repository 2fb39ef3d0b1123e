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

add_library(nvdra_dep_grpc INTERFACE)
add_library(nvdra_dep_protobuf INTERFACE)
add_library(nvdra_dep_yaml INTERFACE)

if(NOT NVDRA_STATIC_DEPS)
  target_link_libraries(nvdra_dep_grpc INTERFACE gRPC::grpc++)
  target_link_libraries(nvdra_dep_protobuf INTERFACE protobuf::libprotobuf)
  target_link_libraries(nvdra_dep_yaml INTERFACE yaml-cpp)
  add_library(nvdra_dep_log INTERFACE)
  target_link_libraries(nvdra_dep_log INTERFACE spdlog::spdlog fmt::fmt)
  return()
endif()

function(_nvdra_static_archive out name)
  find_library(_nvdra_a_${name} NAMES lib${name}.a REQUIRED NO_CACHE)
  set(${out} ${_nvdra_a_${name}} PARENT_SCOPE)
endfunction()

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
_nvdra_static_archive(_yaml_a yaml-cpp)

target_link_libraries(nvdra_dep_protobuf INTERFACE ${_protobuf_a} Threads::Threads)
target_link_libraries(nvdra_dep_grpc INTERFACE
  "-Wl,--start-group" ${_grpc_archives} ${_absl_archives} ${_protobuf_a} "-Wl,--end-group"
  Threads::Threads m rt dl)
target_link_libraries(nvdra_dep_yaml INTERFACE ${_yaml_a})
get_target_property(_yaml_inc yaml-cpp INTERFACE_INCLUDE_DIRECTORIES)
if(_yaml_inc)
  target_include_directories(nvdra_dep_yaml SYSTEM INTERFACE ${_yaml_inc})
endif()

add_library(nvdra_dep_log STATIC
  ${PROJECT_SOURCE_DIR}/src/util/spdlog_compiled.cc
  ${PROJECT_SOURCE_DIR}/src/util/fmt_compiled.cc)
# The same definitions as the packages' targets, so objects compile alike in
# both modes (the visibility they add is harmless in a static archive).
target_compile_definitions(nvdra_dep_log PUBLIC
  SPDLOG_SHARED_LIB SPDLOG_COMPILED_LIB SPDLOG_FMT_EXTERNAL FMT_SHARED)
target_link_libraries(nvdra_dep_log PUBLIC Threads::Threads)
target_compile_options(nvdra_dep_log PRIVATE -w)
