// SIGTERM/SIGINT handling without signal handlers: the signals are blocked
// in every thread (call Block() before any thread starts, gRPC's included)
// and one thread waits for them synchronously, so shutdown runs as ordinary
// code (stop servers, remove our sockets) rather than in a handler.
#pragma once

namespace nvdra::kubelet {

class ShutdownSignal {
 public:
  // Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and in threads it starts later.
  static void Block();
  // Waits for one of them; returns its number.
  static int Wait();
};

}  // namespace nvdra::kubelet
