# nvdra_add_test(NAME SOURCES a.cc b.cc LIBS lib1 lib2 [LABELS l])
# One GoogleTest binary; every TEST becomes its own ctest entry.
function(nvdra_add_test name)
  if(NOT NVDRA_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
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
