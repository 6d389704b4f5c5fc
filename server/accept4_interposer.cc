// The process-wide accept4 and accept that route gRPC's and the metrics
// server's listeners through the ConnectionGuard (server/connection_guard.h).
// It is its own target, habitat_accept4_interposer, so that only binaries
// that start a PredictionServer replace libc's definitions; an object
// library, because a static archive member is not pulled in to satisfy a
// shared library's reference.
#include <dlfcn.h>
#include <sys/socket.h>

#include "server/connection_guard.h"

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

namespace habitat {

// Strong definition of the weak declaration in connection_guard.cc.
bool Accept4ReachesConnectionGuard() {
  return dlsym(RTLD_DEFAULT, "accept4") == reinterpret_cast<void*>(&accept4);
}

}  // namespace habitat
