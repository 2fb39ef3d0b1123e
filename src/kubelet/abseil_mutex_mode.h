// Abseil's mutex deadlock detection, which gRPC's mutexes run through: off
// in our release builds. Debian's abseil is built without NDEBUG, so every
// lock of a gRPC mutex updates a global lock-order graph (GraphCycles) under
// a global lock, a cost each call pays on every thread. Debug builds keep it.
#pragma once

namespace nvdra::kubelet {

// Call at the start of main, before gRPC takes any lock.
void SetReleaseMutexMode();

}  // namespace nvdra::kubelet
