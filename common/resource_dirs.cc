#include "common/resource_dirs.h"

#include <filesystem>
#include <system_error>

namespace habitat {
namespace {

namespace fs = std::filesystem;

// `path` with links and `..` resolved as far as it exists; unchanged on error.
fs::path Canonical(const fs::path& path) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(path, ec);
  return ec ? path.lexically_normal() : canonical;
}

}  // namespace

std::string ProgramDirectory() {
  std::error_code ec;
  const fs::path program = fs::read_symlink("/proc/self/exe", ec);
  if (ec || program.empty()) return "";
  return program.parent_path().string();
}

std::string ResourceDirFor(const std::string& program_dir, const std::string& build_output_dir,
                           const std::string& source_dir, const std::string& installed_relative) {
  if (program_dir.empty()) return source_dir;
  const fs::path program = Canonical(program_dir);
  if (program == Canonical(build_output_dir)) return source_dir;
  fs::path installed = (program / installed_relative).lexically_normal();
  // "a/b/" normalises to "a/b/": drop the empty last part.
  if (!installed.has_filename() && installed.has_parent_path()) installed = installed.parent_path();
  return installed.string();
}

std::string DefaultResourceDir(const std::string& build_output_dir, const std::string& source_dir,
                               const std::string& installed_relative) {
  return ResourceDirFor(ProgramDirectory(), build_output_dir, source_dir, installed_relative);
}

}  // namespace habitat
