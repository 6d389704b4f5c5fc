// Gzip bombs against the project's clients: a 10 MB .gz trace file that
// inflates to 10 GiB of zeros once made `habitat predict` abort with
// std::bad_alloc and the Python client (habitat_agent.client) raise MemoryError.
// Both must refuse it at their bound, with a message, in bounded memory and
// time. Each runs as a child process with a 4 GiB address-space limit, so
// an unbounded inflation fails fast here instead of taking the machine's
// memory.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/child_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "zlib.h"

namespace habitat::hostile {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kBombMib = 10 << 10;  // inflates to 10 GiB
constexpr rlim_t kChildAddressSpace = rlim_t{4} << 30;

// Deflates `in` with `flush`, appending to `out`.
void Deflate(z_stream& stream, const std::string& in, int flush, std::string* out) {
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  stream.avail_in = static_cast<uInt>(in.size());
  char buffer[1 << 16];
  do {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    deflate(&stream, flush);
    out->append(buffer, sizeof(buffer) - stream.avail_out);
  } while (stream.avail_out == 0 || stream.avail_in > 0);
}

// gzip of `mib` MiB of zeros without deflating them all: after a full
// flush the compressor starts afresh, so every further MiB of zeros
// compresses to the same ~1 KB, which is repeated; the trailer (CRC-32 and
// length of the whole) is computed separately.
std::string GzipBombOfZeros(uint64_t mib) {
  const std::string zeros(1 << 20, '\0');
  z_stream stream{};
  deflateInit2(&stream, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
  std::string first, block, tail;
  Deflate(stream, zeros, Z_FULL_FLUSH, &first);
  Deflate(stream, zeros, Z_FULL_FLUSH, &block);
  Deflate(stream, "", Z_FINISH, &tail);
  deflateEnd(&stream);
  std::string bomb = first;
  bomb.reserve(first.size() + block.size() * mib + tail.size());
  for (uint64_t i = 1; i < mib; ++i) bomb += block;
  bomb.append(tail, 0, tail.size() - 8);  // the final block, without its trailer
  const uLong zeros_crc = crc32(0, reinterpret_cast<const Bytef*>(zeros.data()), zeros.size());
  uLong crc = 0;
  for (uint64_t i = 0; i < mib; ++i) crc = crc32_combine(crc, zeros_crc, zeros.size());
  const uint32_t length = static_cast<uint32_t>(mib << 20);  // modulo 2^32
  for (uint32_t value : {static_cast<uint32_t>(crc), length}) {
    for (int byte = 0; byte < 4; ++byte) bomb.push_back(static_cast<char>(value >> (8 * byte)));
  }
  return bomb;
}

struct ChildResult {
  int status = -1;
  long max_rss_kib = -1;
  double seconds = 0;
  std::string output;  // stdout and stderr
};

// Runs `args` (at most 60 s) with RLIMIT_AS = kChildAddressSpace (not
// under AddressSanitizer).
ChildResult RunLimited(const std::vector<std::string>& args, const std::string& output_path) {
  ChildResult result;
  const absl::Time start = absl::Now();
  ChildOptions options;
  options.stdout_path = options.stderr_path = output_path;
#ifndef __SANITIZE_ADDRESS__
  // AddressSanitizer reserves terabytes of address space for its shadow:
  // the limit would stop a sanitized CLI before main. Peak RSS still
  // bounds it there.
  options.limits = {{RLIMIT_AS, kChildAddressSpace}};
#endif
  const absl::StatusOr<pid_t> started = StartChild(args, options);
  EXPECT_TRUE(started.ok()) << started.status();
  if (!started.ok()) return result;
  const pid_t pid = *started;
  rusage usage{};
  while (true) {
    const pid_t done = wait4(pid, &result.status, WNOHANG, &usage);
    if (done == pid) break;
    if (absl::Now() - start > absl::Seconds(60)) {
      kill(pid, SIGKILL);
      wait4(pid, &result.status, 0, &usage);
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  result.max_rss_kib = usage.ru_maxrss;
  std::ifstream in(output_path);
  std::stringstream text;
  text << in.rdbuf();
  result.output = text.str();
  return result;
}

// HABITAT_HOSTILE_CLI and HABITAT_HOSTILE_PYTHON_DIR run the tests against
// another build of the CLI or another copy of agent/python.
std::string FromEnv(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

class GzipBombTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(absl::StrCat(::testing::TempDir(), "/hostile-gzip-", getpid()));
    mkdir(dir_->c_str(), 0700);
    const std::string bomb = GzipBombOfZeros(kBombMib);
    std::ofstream(*dir_ + "/bomb.json.gz", std::ios::binary) << bomb;
    std::ofstream(*dir_ + "/bomb.trace.gz", std::ios::binary) << bomb;
    std::printf("bomb: %zu bytes of gzip inflating to %llu bytes\n", bomb.size(),
                static_cast<unsigned long long>(kBombMib << 20));
  }
  static void TearDownTestSuite() {
    for (const char* name : {"bomb.json.gz", "bomb.trace.gz", "out.txt"}) {
      unlink((*dir_ + "/" + name).c_str());
    }
    rmdir(dir_->c_str());
    delete dir_;
  }
  static std::string* dir_;
};

std::string* GzipBombTest::dir_ = nullptr;

TEST_F(GzipBombTest, CliRefusesIt) {
  const ChildResult run =
      RunLimited({FromEnv("HABITAT_HOSTILE_CLI", HABITAT_CLI_BINARY), "predict",
                  *dir_ + "/bomb.json.gz", "--batch-size", "8", "--data-dir", HABITAT_DATA_DIR},
                 *dir_ + "/out.txt");
  std::printf("habitat predict: status %d in %.1f s, peak RSS %ld KiB: %s", run.status, run.seconds,
              run.max_rss_kib, run.output.c_str());
  ASSERT_TRUE(WIFEXITED(run.status)) << "status " << run.status << ": " << run.output;
  EXPECT_EQ(WEXITSTATUS(run.status), 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("inflates to more than 1024 MiB"));
  // The 1 GiB bound, and a copy while the string grows.
  EXPECT_LT(run.max_rss_kib, 2560L << 10);
}

TEST_F(GzipBombTest, PythonClientRefusesIt) {
  const ChildResult run = RunLimited(
      {HABITAT_PYTHON, "-c",
       "import sys; sys.path.insert(0, sys.argv[1]); from habitat_agent import client; "
       "client.trace_bytes(sys.argv[2])",
       FromEnv("HABITAT_HOSTILE_PYTHON_DIR", HABITAT_AGENT_PYTHON_DIR), *dir_ + "/bomb.trace.gz"},
      *dir_ + "/out.txt");
  std::printf("habitat_agent.client.trace_bytes: status %d in %.1f s, peak RSS %ld KiB: %s",
              run.status, run.seconds, run.max_rss_kib, run.output.c_str());
  ASSERT_TRUE(WIFEXITED(run.status)) << "status " << run.status << ": " << run.output;
  EXPECT_EQ(WEXITSTATUS(run.status), 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("ValueError"));
  EXPECT_THAT(run.output, HasSubstr("inflates to more than 67108864 bytes"));
  EXPECT_LT(run.max_rss_kib, 512L << 10);
}

}  // namespace
}  // namespace habitat::hostile
