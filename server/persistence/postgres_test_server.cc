#include "server/persistence/postgres_test_server.h"

#include <fcntl.h>
#include <glob.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/child_process.h"
#include "testing/ports.h"

namespace habitat::testing {
namespace {

// Waits up to `timeout` for `pid`; its wait status, or -1.
int WaitFor(pid_t pid, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return -1;
}

// Starts `args` with stdout and stderr appended to `log_path`, in `cwd`, as
// uid/gid when `switch_user`; -1 if it cannot.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log_path,
            const std::string& cwd, bool switch_user, uid_t uid, gid_t gid, int death_signal) {
  ChildOptions options;
  options.stdout_path = options.stderr_path = log_path;
  options.append = true;
  options.cwd = cwd;
  if (switch_user) options.user = {uid, gid};
  // Set after the user switch, which clears it: a test that dies does not
  // leave the server running.
  options.death_signal = death_signal;
  return StartChild(args, options).value_or(-1);
}

std::string ReadLog(const std::string& path) {
  std::ifstream log(path);
  std::stringstream text;
  text << log.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<std::string> PostgresTestServer::FindBinaries() {
  if (const char* bin = std::getenv("HABITAT_POSTGRES_BIN"); bin != nullptr && bin[0] != '\0') {
    return std::string(bin);
  }
  glob_t found{};
  std::string best;
  int best_version = -1;
  if (::glob("/usr/lib/postgresql/*/bin/initdb", 0, nullptr, &found) == 0) {
    for (size_t i = 0; i < found.gl_pathc; ++i) {
      const std::string initdb = found.gl_pathv[i];
      const std::string dir = initdb.substr(0, initdb.size() - std::strlen("/initdb"));
      const std::string version =
          dir.substr(std::strlen("/usr/lib/postgresql/"),
                     dir.size() - std::strlen("/usr/lib/postgresql/") - std::strlen("/bin"));
      int number = 0;
      if (absl::SimpleAtoi(version, &number) && number > best_version &&
          ::access((dir + "/postgres").c_str(), X_OK) == 0) {
        best = dir;
        best_version = number;
      }
    }
  }
  ::globfree(&found);
  if (best.empty()) {
    return absl::NotFoundError(
        "no PostgreSQL server binaries (initdb, postgres) under /usr/lib/postgresql/*/bin; "
        "install the Debian package postgresql or set HABITAT_POSTGRES_BIN");
  }
  return best;
}

absl::StatusOr<std::unique_ptr<PostgresTestServer>> PostgresTestServer::Start() {
  std::unique_ptr<PostgresTestServer> server(new PostgresTestServer);
  auto bin = FindBinaries();
  if (!bin.ok()) return bin.status();
  server->bin_ = *bin;
  if (::geteuid() == 0) {
    const passwd* user = ::getpwnam("postgres");
    if (user == nullptr) user = ::getpwnam("nobody");
    if (user == nullptr) {
      return absl::FailedPreconditionError(
          "running as root and neither user postgres nor nobody exists to run PostgreSQL as");
    }
    server->switch_user_ = true;
    server->uid_ = user->pw_uid;
    server->gid_ = user->pw_gid;
  }
  // Under /tmp, not $TEST_TMPDIR: the unprivileged user must reach it and
  // the socket path must stay short.
  char pattern[] = "/tmp/habitat_pg_XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    return absl::UnavailableError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
  }
  server->dir_ = pattern;
  server->data_dir_ = server->dir_ + "/data";
  server->socket_dir_ = server->dir_ + "/socket";
  if (::mkdir(server->socket_dir_.c_str(), 0700) != 0) {
    return absl::UnavailableError(absl::StrCat("mkdir ", server->socket_dir_));
  }
  if (server->switch_user_ &&
      (::chown(server->dir_.c_str(), server->uid_, server->gid_) != 0 ||
       ::chown(server->socket_dir_.c_str(), server->uid_, server->gid_) != 0)) {
    return absl::UnavailableError(absl::StrCat("chown ", server->dir_, ": ", std::strerror(errno)));
  }
  server->port_ = UnusedPort();

  // initdb, as the unprivileged user; --no-sync: a test cluster need not
  // survive power loss.
  const std::vector<std::string> initdb = {server->bin_ + "/initdb",
                                           "-D",
                                           server->data_dir_,
                                           "-U",
                                           "habitat",
                                           "--auth=trust",
                                           "--no-sync",
                                           "--no-instructions",
                                           "-E",
                                           "UTF8",
                                           "--locale=C"};
  const pid_t pid = Spawn(initdb, server->dir_ + "/initdb.log", server->dir_, server->switch_user_,
                          server->uid_, server->gid_, SIGKILL);
  if (pid < 0) return absl::UnavailableError("fork failed");
  const int status = WaitFor(pid, absl::Seconds(120));
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat("initdb failed (wait status ", status,
                                               "): ", ReadLog(server->dir_ + "/initdb.log")));
  }
  if (absl::Status launched = server->Launch(); !launched.ok()) return launched;
  return server;
}

absl::Status PostgresTestServer::Launch() {
  const std::vector<std::string> args = {bin_ + "/postgres",
                                         "-D",
                                         data_dir_,
                                         "-p",
                                         absl::StrCat(port_),
                                         "-k",
                                         socket_dir_,
                                         "-c",
                                         "listen_addresses=127.0.0.1",
                                         "-c",
                                         "fsync=off",
                                         "-c",
                                         "shared_buffers=16MB",
                                         "-c",
                                         "max_connections=60",
                                         "-c",
                                         "logging_collector=off"};
  const std::string log_path = dir_ + "/server.log";
  // SIGQUIT on the test's death: PostgreSQL's immediate shutdown.
  pid_ = Spawn(args, log_path, dir_, switch_user_, uid_, gid_, SIGQUIT);
  if (pid_ < 0) return absl::UnavailableError("fork failed");
  const std::string conninfo = ConnInfo("postgres");
  const absl::Time end = absl::Now() + absl::Seconds(60);
  while (absl::Now() < end) {
    if (PQping(conninfo.c_str()) == PQPING_OK) return absl::OkStatus();
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::UnavailableError(absl::StrCat("postgres exited at start: ", Log()));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat("postgres not ready in 60 s: ", Log()));
}

absl::Status PostgresTestServer::Stop() {
  if (pid_ <= 0) return absl::OkStatus();
  ::kill(pid_, SIGINT);  // fast shutdown: disconnects clients
  int status = WaitFor(pid_, absl::Seconds(30));
  if (status == -1) {
    ::kill(pid_, SIGKILL);
    status = WaitFor(pid_, absl::Seconds(10));
  }
  pid_ = -1;
  return status == -1 ? absl::DeadlineExceededError("postgres did not stop") : absl::OkStatus();
}

absl::Status PostgresTestServer::Resume() { return Launch(); }

PostgresTestServer::~PostgresTestServer() {
  Stop().IgnoreError();
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::string PostgresTestServer::ConnInfo(const std::string& dbname) const {
  return absl::StrCat("host=", socket_dir_, " port=", port_, " user=habitat dbname=", dbname);
}

absl::StatusOr<std::string> PostgresTestServer::CreateDatabase() {
  const std::string name = absl::StrCat("habitat_test_", ++databases_);
  PGconn* conn = PQconnectdb(ConnInfo("postgres").c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string error = PQerrorMessage(conn);
    PQfinish(conn);
    return absl::UnavailableError(error);
  }
  PGresult* result = PQexec(conn, absl::StrCat("CREATE DATABASE ", name).c_str());
  const bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
  std::string error = PQerrorMessage(conn);
  PQclear(result);
  PQfinish(conn);
  if (!ok) return absl::UnavailableError(error);
  return ConnInfo(name);
}

std::string PostgresTestServer::Log() const { return ReadLog(dir_ + "/server.log"); }

}  // namespace habitat::testing
