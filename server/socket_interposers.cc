// The process-wide accept4 and accept that route gRPC's and the metrics
// server's listeners through the ConnectionGuard (server/connection_guard.h),
// and recvmsg, through which the frame guard reads what plaintext gRPC
// connections send (server/http2_frame_guard.h). It is its own target, habitat_socket_interposers,
// so that only binaries that start a PredictionServer replace libc's definitions; an object
// library, because a static archive member is not pulled in to satisfy a
// shared library's reference.
#include <dlfcn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "server/connection_guard.h"
#include "server/http2_frame_guard.h"

// Interposes libc's accept4: the dynamic linker binds libgrpc's calls to the
// executable's definition before libc's.
extern "C" int accept4(int fd, sockaddr* address, socklen_t* address_length, int flags) {
  return habitat::ConnectionGuard::Get().Accept(fd, address, address_length, flags);
}

// And accept, which civetweb (the /metrics server) calls. civetweb polls
// before each accept and ignores a failed one, while its listener may
// block: one attempt per call, a shed connection reported as EAGAIN.
extern "C" int accept(int fd, sockaddr* address, socklen_t* address_length) {
  return habitat::ConnectionGuard::Get().Accept(fd, address, address_length, 0,
                                                /*one_attempt=*/true);
}

// And recvmsg, with which gRPC reads a connection: the frame guard
// (server/http2_frame_guard.h) reads the frame headers of what a plaintext
// connection sent. The kernel call is made directly.
extern "C" ssize_t recvmsg(int fd, msghdr* message, int flags) {
  const ssize_t got = syscall(SYS_recvmsg, fd, message, flags);
  if (got > 0 && (flags & MSG_PEEK) == 0 &&
      !habitat::Http2FrameGuard::Get().Received(fd, *message, static_cast<size_t>(got))) {
    shutdown(fd, SHUT_RDWR);
    errno = ECONNRESET;
    return -1;
  }
  return got;
}

namespace habitat {

// Strong definition of the weak declaration in connection_guard.cc.
bool Accept4ReachesConnectionGuard() {
  return dlsym(RTLD_DEFAULT, "accept4") == reinterpret_cast<void*>(&accept4);
}

}  // namespace habitat
