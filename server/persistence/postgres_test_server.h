// A throwaway PostgreSQL server for tests, from Debian's binaries
// (/usr/lib/postgresql/<version>/bin, or $HABITAT_POSTGRES_BIN): initdb in a
// temporary directory, the postmaster on a free loopback port with its unix
// socket in that directory, trust authentication for the user "habitat".
// PostgreSQL refuses to run as root, so as root both run as the "postgres"
// user (Debian's package creates it), else as "nobody".
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace habitat::testing {

class PostgresTestServer {
 public:
  // The directory holding initdb and postgres; NOT_FOUND when none is
  // installed (the only case in which tests may skip).
  static absl::StatusOr<std::string> FindBinaries();
  static absl::StatusOr<std::unique_ptr<PostgresTestServer>> Start();
  // Stops the server and removes its directory.
  ~PostgresTestServer();

  // Fast shutdown, as an operator's restart would; Resume starts it again
  // on the same data, port and socket.
  absl::Status Stop();
  absl::Status Resume();

  // A fresh, empty database; its connection string.
  absl::StatusOr<std::string> CreateDatabase();
  // The connection string of `dbname` (over the unix socket).
  std::string ConnInfo(const std::string& dbname) const;
  const std::string& socket_dir() const { return socket_dir_; }
  int port() const { return port_; }
  // The server's log so far, for failure messages.
  std::string Log() const;

 private:
  PostgresTestServer() = default;
  absl::Status Launch();

  std::string bin_, dir_, data_dir_, socket_dir_;
  int port_ = 0;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool switch_user_ = false;
  pid_t pid_ = -1;
  int databases_ = 0;
};

}  // namespace habitat::testing
