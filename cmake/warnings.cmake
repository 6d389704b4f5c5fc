# One interface target carries the project's warning, sanitizer and fuzzing
# flags; every project target links it PRIVATE.
add_library(habitat_warnings INTERFACE)
target_compile_options(habitat_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter)

option(HABITAT_BUILD_FUZZERS
       "Build the libFuzzer targets in tests/fuzz (clang only; implies HABITAT_SANITIZE)" OFF)
if(HABITAT_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "HABITAT_BUILD_FUZZERS needs clang: configure a separate build "
                        "directory with CC=clang CXX=clang++")
  endif()
  # A fuzzer finds memory errors only when they fault: always sanitize.
  set(HABITAT_SANITIZE ON CACHE BOOL "Build with AddressSanitizer and UBSan" FORCE)
  # Coverage instrumentation for all project code; only the fuzz executables
  # link libFuzzer itself (-fsanitize=fuzzer, tests/fuzz/CMakeLists.txt).
  target_compile_options(habitat_warnings INTERFACE -fsanitize=fuzzer-no-link)
endif()

if(HABITAT_SANITIZE)
  target_compile_options(habitat_warnings INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(habitat_warnings INTERFACE -fsanitize=address,undefined)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 with ASan reports false -Wmaybe-uninitialized inside libstdc++'s
    # <regex> (std::function moves in regex_automaton.h), 50 times a build.
    target_compile_options(habitat_warnings INTERFACE -Wno-maybe-uninitialized)
  endif()
endif()
