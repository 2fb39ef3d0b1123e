# nvdra_add_test(NAME SOURCES a.cc b.cc LIBS lib1 lib2 [LABELS l])
# One GoogleTest binary; every TEST becomes its own ctest entry.
function(nvdra_add_test name)
  if(NOT NVDRA_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock GTest::gtest_main Threads::Threads)
  target_compile_definitions(${name} PRIVATE
    NVDRA_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    NVDRA_BINARY_DIR="${PROJECT_BINARY_DIR}"
    NVDRA_BIN_DIR="${CMAKE_RUNTIME_OUTPUT_DIRECTORY}"
    NVDRA_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared")
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
endfunction()
