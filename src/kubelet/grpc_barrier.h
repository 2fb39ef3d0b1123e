// The exception barrier for gRPC handlers: every service method of the
// kubelet surface runs its body through GuardedRpc, so an exception that
// escapes our code is logged and answered as INTERNAL (the kubelet retries)
// instead of reaching the gRPC library.
#pragma once

#include <grpcpp/support/status.h>

#include <string_view>
#include <utility>

#include "util/run_guarded.h"

namespace nvdra::kubelet {

template <typename Handler>
grpc::Status GuardedRpc(std::string_view method, Handler&& handler) {
  Result<grpc::Status> r = RunGuarded(method, std::forward<Handler>(handler));
  if (!r.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, r.status().message());
  return std::move(r).value();
}

}  // namespace nvdra::kubelet
