#include "common/file_io.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace habitat {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int error = errno;
  return ErrnoStatus(error, absl::StrCat(what, " '", path, "': ", std::strerror(error)));
}

bool IsGzip(absl::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
         static_cast<unsigned char>(data[1]) == 0x8b;
}

}  // namespace

absl::Status ErrnoStatus(int error, absl::string_view message) {
  if (error == ENOSPC || error == EDQUOT || error == EFBIG) {
    return absl::ResourceExhaustedError(absl::StrCat(message, " (out of space)"));
  }
  return absl::UnavailableError(message);
}

absl::StatusOr<std::string> ReadFile(const std::string& path, size_t max_inflated_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return ErrnoError("cannot read", path);
  std::string data = buffer.str();
  if (IsGzip(data)) {
    auto inflated = Gunzip(data, max_inflated_bytes);
    if (!inflated.ok()) {
      // A file too large to inflate keeps RESOURCE_EXHAUSTED.
      return absl::Status(absl::IsResourceExhausted(inflated.status())
                              ? absl::StatusCode::kResourceExhausted
                              : absl::StatusCode::kInvalidArgument,
                          absl::StrCat("'", path, "': ", inflated.status().message()));
    }
    return inflated;
  }
  return data;
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  const std::string tmp = absl::StrCat(path, ".", getpid(), ".tmp");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  size_t written = 0;
  while (written < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status error = ErrnoError("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return error;
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    absl::Status error = ErrnoError("cannot flush", tmp);
    ::unlink(tmp.c_str());
    return error;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status error = ErrnoError("cannot rename to", path);
    ::unlink(tmp.c_str());
    return error;
  }
  const size_t slash = path.rfind('/');
  return SyncDirectory(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash));
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open directory", dir);
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0 && error != EINVAL) {
    errno = error;
    return ErrnoError("cannot fsync directory", dir);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Gunzip(absl::string_view compressed, size_t max_inflated_bytes) {
  z_stream stream{};
  // 15 + 32: accept zlib and gzip headers.
  if (inflateInit2(&stream, 15 + 32) != Z_OK) {
    return absl::InternalError("zlib inflateInit2 failed");
  }
  if (compressed.size() > std::numeric_limits<uInt>::max()) {
    inflateEnd(&stream);
    return absl::InvalidArgumentError(
        absl::StrCat("gzip data of ", compressed.size(), " bytes; at most 4 GiB is read"));
  }
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char chunk[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    stream.next_out = reinterpret_cast<Bytef*>(chunk);
    stream.avail_out = sizeof(chunk);
    rc = inflate(&stream, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&stream);
      return absl::InvalidArgumentError(
          absl::StrCat("corrupt or truncated gzip data (zlib error ", rc, ")"));
    }
    const size_t produced = sizeof(chunk) - stream.avail_out;
    if (produced > max_inflated_bytes - out.size()) {
      inflateEnd(&stream);
      return absl::ResourceExhaustedError(
          absl::StrCat("inflates to more than ", max_inflated_bytes, " bytes"));
    }
    out.append(chunk, produced);
    if (rc == Z_OK && stream.avail_in == 0 && stream.avail_out != 0) {
      inflateEnd(&stream);
      return absl::InvalidArgumentError("truncated gzip data");
    }
  }
  // The member ended: what follows (appended junk, a second member) would
  // go unread, so the data is refused rather than half taken.
  const size_t trailing = stream.avail_in;
  inflateEnd(&stream);
  if (trailing != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        trailing, " bytes follow the end of the gzip data (", compressed.size() - trailing,
        " bytes); a second gzip member or trailing bytes are not accepted"));
  }
  return out;
}

absl::StatusOr<std::string> Gzip(absl::string_view data) {
  z_stream stream{};
  // 15 + 16: write a gzip header.
  if (deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError("zlib deflateInit2 failed");
  }
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char chunk[1 << 16];
  int rc = Z_OK;
  do {
    stream.next_out = reinterpret_cast<Bytef*>(chunk);
    stream.avail_out = sizeof(chunk);
    rc = deflate(&stream, Z_FINISH);
    out.append(chunk, sizeof(chunk) - stream.avail_out);
  } while (rc == Z_OK);
  deflateEnd(&stream);
  if (rc != Z_STREAM_END) return absl::InternalError("zlib deflate failed");
  return out;
}

}  // namespace habitat
