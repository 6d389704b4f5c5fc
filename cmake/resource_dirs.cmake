# Installed layout, and how the shipped programs find their data files.
#
# `cmake --install` puts the programs in <prefix>/bin and what they read at
# run time in <prefix>/share/habitat/{data,models} (GNUInstallDirs). A
# program run from the build tree reads the source tree's data/ and models/
# instead, so tests and development need no install (common/resource_dirs.h).
include(GNUInstallDirs)
set(HABITAT_INSTALL_DATADIR "${CMAKE_INSTALL_DATADIR}/habitat/data")
set(HABITAT_INSTALL_MODELSDIR "${CMAKE_INSTALL_DATADIR}/habitat/models")

# habitat_resource_dirs(TARGET): compiles into TARGET (an executable that
# install() ships) the definitions its main() passes to
# habitat::DefaultResourceDir:
#   HABITAT_BUILD_OUTPUT_DIR   where the build writes TARGET
#   HABITAT_SOURCE_DATA_DIR    the source tree's data/ and models/
#   HABITAT_SOURCE_MODELS_DIR
#   HABITAT_INSTALLED_DATA_DIR    the installed data and models directories,
#   HABITAT_INSTALLED_MODELS_DIR  relative to the installed bin directory (so
#                                 `cmake --install --prefix` and DESTDIR
#                                 staging can move the whole tree)
function(habitat_resource_dirs target)
  file(RELATIVE_PATH data_relative "${CMAKE_INSTALL_FULL_BINDIR}"
       "${CMAKE_INSTALL_FULL_DATADIR}/habitat/data")
  file(RELATIVE_PATH models_relative "${CMAKE_INSTALL_FULL_BINDIR}"
       "${CMAKE_INSTALL_FULL_DATADIR}/habitat/models")
  target_compile_definitions(${target} PRIVATE
    HABITAT_BUILD_OUTPUT_DIR="$<TARGET_FILE_DIR:${target}>"
    HABITAT_SOURCE_DATA_DIR="${HABITAT_DATA_DIR}"
    HABITAT_SOURCE_MODELS_DIR="${HABITAT_MODELS_DIR}"
    HABITAT_INSTALLED_DATA_DIR="${data_relative}"
    HABITAT_INSTALLED_MODELS_DIR="${models_relative}")
  target_link_libraries(${target} PRIVATE habitat_resource_dirs)
endfunction()
