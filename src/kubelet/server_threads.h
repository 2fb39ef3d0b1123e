// How many threads the plugin's synchronous gRPC services (the device health
// streams on the DRA socket) may keep. gRPC's defaults (one completion queue per core,
// each with its own pollers) park threads that an idle plugin pays for in
// memory. One completion queue with one to two pollers: a poller that takes
// a call hands polling to the other, so calls still run concurrently (the
// sync server starts a thread for every call beyond that); with a single
// poller it would start and end a thread for every call, which costs more
// per call than a parked thread costs to keep.
#pragma once

#include <grpcpp/server_builder.h>

namespace nvdra::kubelet {

inline void LimitServerThreads(grpc::ServerBuilder& builder) {
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
}

}  // namespace nvdra::kubelet
