#ifndef HABITAT_COMMON_RESOURCE_DIRS_H_
#define HABITAT_COMMON_RESOURCE_DIRS_H_

#include <string>

namespace habitat {

// Where a shipped program (habitat-server, the habitat CLI) finds the files
// it reads at run time -- the GPU spec database and price catalogs (data/),
// the served models (models/) -- when no flag names them.
//
// A program run from the directory the build wrote it to uses the source
// tree's directory, so a build works without installing. Anywhere else
// (installed by `cmake --install`, copied into an image) it uses the
// installed directory, found relative to the program itself:
// <prefix>/bin/habitat -> <prefix>/share/habitat/data. There is no fallback
// from one to the other: an installed program never reads the source tree
// it was built from, and a missing installed directory is an error naming
// it. CMake supplies the arguments (habitat_resource_dirs in
// cmake/resource_dirs.cmake).

// The directory of the running program (/proc/self/exe, links resolved);
// empty when it cannot be read.
std::string ProgramDirectory();

// The rule above for a program in `program_dir` (empty: unknown, which
// gives `source_dir`). `build_output_dir` is where the build writes the
// program; `installed_relative` is the installed directory relative to the
// installed program's directory (e.g. "../share/habitat/data").
std::string ResourceDirFor(const std::string& program_dir, const std::string& build_output_dir,
                           const std::string& source_dir, const std::string& installed_relative);

// ResourceDirFor for the running program.
std::string DefaultResourceDir(const std::string& build_output_dir, const std::string& source_dir,
                               const std::string& installed_relative);

}  // namespace habitat

#endif  // HABITAT_COMMON_RESOURCE_DIRS_H_
