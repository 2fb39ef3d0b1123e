// How many threads a plugin's gRPC servers may keep. A plugin serves three
// small servers (registration, DRA, health) whose calls are rare and short;
// gRPC's defaults (one completion queue per core, each with its own pollers)
// park threads that an idle plugin pays for in memory. One completion queue
// with one to two pollers per server still lets calls run concurrently:
// the sync server starts a handler thread per call in flight.
#pragma once

#include <grpcpp/server_builder.h>

namespace nvdra::kubelet {

inline void LimitServerThreads(grpc::ServerBuilder& builder) {
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
}

}  // namespace nvdra::kubelet
