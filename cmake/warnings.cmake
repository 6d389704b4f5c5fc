# One interface target carries the project's warning and sanitizer flags;
# every project target links it PRIVATE.
add_library(habitat_warnings INTERFACE)
target_compile_options(habitat_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter)
if(HABITAT_SANITIZE)
  target_compile_options(habitat_warnings INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(habitat_warnings INTERFACE -fsanitize=address,undefined)
endif()
