// Loopback ports for tests that must name a port before a server binds it
// (a restart on the same address, a client of nobody).
#pragma once

namespace habitat::testing {

// A loopback port nothing listens on (bound, read, closed); 0 when none
// could be bound. Another process may take it before the caller does;
// tests that can bind port 0 and read the port back should.
int UnusedPort();

}  // namespace habitat::testing
