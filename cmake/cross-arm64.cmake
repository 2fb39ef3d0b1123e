# CMake toolchain file of the arm64 (aarch64, e.g. Grace) cross build: the
# build machine's clang compiles for aarch64-linux-gnu against a sysroot of
# Debian's arm64 packages (scripts/cross-sysroot), and lld links. Nothing
# runs emulated while building: code generators (protoc, grpc_cpp_plugin)
# are the build machine's own. scripts/build sets it up with NVDRA_ARCH=arm64.
#
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/cross-arm64.cmake -DNVDRA_SYSROOT=DIR ...
#
# NVDRA_SYSROOT may also come from the environment (try_compile projects
# get it passed on through CMAKE_TRY_COMPILE_PLATFORM_VARIABLES).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT NVDRA_SYSROOT AND DEFINED ENV{NVDRA_SYSROOT})
  set(NVDRA_SYSROOT "$ENV{NVDRA_SYSROOT}")
endif()
if(NOT NVDRA_SYSROOT OR NOT EXISTS "${NVDRA_SYSROOT}/usr/lib/aarch64-linux-gnu/libc.so.6")
  message(FATAL_ERROR "cross-arm64.cmake: NVDRA_SYSROOT ('${NVDRA_SYSROOT}') is not an arm64 sysroot; "
                      "make one with scripts/cross-sysroot arm64")
endif()
set(NVDRA_SYSROOT "${NVDRA_SYSROOT}" CACHE PATH "The arm64 sysroot (scripts/cross-sysroot)")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES NVDRA_SYSROOT)

if(NOT CMAKE_C_COMPILER)
  set(CMAKE_C_COMPILER clang)
endif()
if(NOT CMAKE_CXX_COMPILER)
  set(CMAKE_CXX_COMPILER clang++)
endif()
set(CMAKE_C_COMPILER_TARGET aarch64-linux-gnu)
set(CMAKE_CXX_COMPILER_TARGET aarch64-linux-gnu)
set(CMAKE_SYSROOT "${NVDRA_SYSROOT}")
# lld links every target (GNU ld of the build machine knows no aarch64); the
# sysroot's GCC 12 provides crt files, libgcc and libstdc++, found by clang
# below the sysroot.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-fuse-ld=lld")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-fuse-ld=lld")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "-fuse-ld=lld")
# Strip and friends that read aarch64 objects (binutils-aarch64-linux-gnu).
find_program(CMAKE_STRIP aarch64-linux-gnu-strip)
find_program(CMAKE_OBJCOPY aarch64-linux-gnu-objcopy)

# Libraries, headers and CMake packages only from the sysroot; programs
# (protoc, python3) only from the build machine.
set(CMAKE_FIND_ROOT_PATH "${NVDRA_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config (gRPC's package looks re2 up with it) reads the sysroot's .pc
# files only.
set(ENV{PKG_CONFIG_LIBDIR} "${NVDRA_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${NVDRA_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${NVDRA_SYSROOT}")

# Tests of an arm64 build tree run under user-mode emulation; the sysroot
# provides the loader and shared libraries.
find_program(NVDRA_QEMU_AARCH64 qemu-aarch64-static)
if(NVDRA_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${NVDRA_QEMU_AARCH64};-L;${NVDRA_SYSROOT}")
endif()
