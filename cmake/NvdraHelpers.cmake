# nvdra_add_test(NAME SOURCES a.cc b.cc LIBS lib1 lib2 [LABELS l])
# One GoogleTest binary; every TEST becomes its own ctest entry.
function(nvdra_add_test name)
  if(NOT NVDRA_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  # Unity batches of 8 test files (CMakeLists.txt, NVDRA_UNITY_BUILD): the
  # files of one binary share one anonymous namespace per batch, so their
  # local helpers need distinct names.
  set_target_properties(${name} PROPERTIES UNITY_BUILD_BATCH_SIZE 8)
  # The test files themselves compile without optimisation (the libraries
  # under test keep the build's -O2): about a third of a test file's compile
  # time is the optimiser's, and no test's own code is hot.
  target_compile_options(${name} PRIVATE -O0)
  # Tests build model structs from their leading fields on purpose; the
  # libraries keep the warning.
  target_compile_options(${name} PRIVATE -Wno-missing-field-initializers)
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock GTest::gtest_main Threads::Threads)
  # Paths come from one generated object (util/test_paths.h), so test
  # objects compile the same in every checkout.
  target_link_libraries(${name} PRIVATE nvdra_test_paths)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
endfunction()

include(CheckLinkerFlag)
check_linker_flag(CXX "-Wl,--icf=safe" NVDRA_LINKER_ICF)
set(NVDRA_STARTUP_ORDER ${PROJECT_SOURCE_DIR}/cmake/startup-order.txt)
if(EXISTS ${NVDRA_STARTUP_ORDER})
  check_linker_flag(CXX "-Wl,--symbol-ordering-file=${NVDRA_STARTUP_ORDER}" NVDRA_LINKER_SYMBOL_ORDERING)
endif()

# nvdra_shipped_binary(TARGET)
# A program of the image. With NVDRA_STATIC_DEPS it is linked without PIE
# and with static libstdc++/libgcc: a position-independent executable has
# its pointer tables relocated, and so made resident, at every start, and a
# shared libstdc++ is mapped and relocated whole (docs/benchmarks.md). Not
# when a version pin fell back to a shared C++ library (cmake/NvdraDeps.cmake):
# that library needs the shared libstdc++.
function(nvdra_shipped_binary target)
  if(NOT NVDRA_ALL_DEPS_STATIC)
    return()
  endif()
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  target_link_options(${target} PRIVATE -no-pie -static-libstdc++ -static-libgcc -Wl,--gc-sections)
  # Identical functions folded where no code takes their address (lld's
  # safe mode, from the compiler's address-significance tables).
  if(NVDRA_LINKER_ICF)
    target_link_options(${target} PRIVATE -Wl,--icf=safe)
  endif()
  # The functions a start and the first claims run, laid out together
  # (cmake/startup-order.txt, from scripts/startup-order): the pages a start
  # touches, and the neighbours the kernel maps with each, are then mostly
  # these, not a few functions each scattered over the whole text.
  if(NVDRA_LINKER_SYMBOL_ORDERING AND NOT NVDRA_STARTUP_TRACE)
    target_link_options(${target} PRIVATE -Wl,--symbol-ordering-file=${NVDRA_STARTUP_ORDER}
                        -Wl,--no-warn-symbol-ordering)
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${NVDRA_STARTUP_ORDER})
  endif()
endfunction()
