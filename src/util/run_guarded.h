// The barrier at every place where work crosses into another thread or out to
// a gRPC peer (claim workers, periodic loops, service handlers). An exception
// that escapes the work would otherwise end the process (std::terminate on a
// worker thread) or surface as an opaque gRPC UNKNOWN; RunGuarded turns it
// into an Internal Status with one error log line naming the work, so the
// caller reports it like any other failure and the process keeps serving.
//
//   PrepareOutcome r = RunGuarded("prepare of claim ns/name:uid",
//                                 [&] { return engine.PrepareClaim(...); });
//
// `work` may return void (RunGuarded gives a Status), a Status, a Result<T>
// (returned as is) or any other T (wrapped in a Result<T>).
#pragma once

#include <string_view>
#include <type_traits>
#include <utility>

#include "util/status.h"

namespace nvdra {

namespace run_guarded_internal {

template <typename T>
struct IsResult : std::false_type {};
template <typename T>
struct IsResult<Result<T>> : std::true_type {};

}  // namespace run_guarded_internal

// Describes the exception being handled; call only inside a catch block.
std::string DescribeCurrentException();

// The Status for an exception that escaped `what`; logs it once at error
// level. Call only inside a catch block.
Status EscapedException(std::string_view what);

template <typename Work>
auto RunGuarded(std::string_view what, Work&& work) {
  using R = std::invoke_result_t<Work&>;
  if constexpr (std::is_void_v<R>) {
    try {
      work();
      return Status::Ok();
    } catch (...) {
      return EscapedException(what);
    }
  } else if constexpr (std::is_same_v<R, Status> || run_guarded_internal::IsResult<R>::value) {
    try {
      return R(work());
    } catch (...) {
      return R(EscapedException(what));
    }
  } else {
    try {
      return Result<R>(work());
    } catch (...) {
      return Result<R>(EscapedException(what));
    }
  }
}

}  // namespace nvdra
