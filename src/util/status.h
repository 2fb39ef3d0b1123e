// Errors as values. Every layer boundary returns Status or Result<T> so a
// failure carries a message a user can act on (what failed, for which claim,
// why) and a code that tells the caller whether a retry can help.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace nvdra {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad input; retrying the same input will fail again
  kNotFound,
  kAlreadyExists,
  kConflict,            // held by someone else right now (device, lock, resourceVersion)
  kFailedPrecondition,  // the world is not in the state the operation needs
  kUnavailable,         // transient: retry later (API down, not ready yet)
  kDeadlineExceeded,
  kPermissionDenied,
  kDataLoss,  // damaged durable state
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // True for failures that a later retry of the same request may fix.
  bool retryable() const {
    return code_ == StatusCode::kUnavailable || code_ == StatusCode::kDeadlineExceeded ||
           code_ == StatusCode::kConflict;
  }

  // A failure that no retry of the same request can fix (a bad config, a
  // device this node does not have), as opposed to one that only failed
  // this time. Callers report it (e.g. as an Event) besides returning it.
  // Travels with the error through Wrap.
  bool permanent() const { return permanent_; }
  Status AsPermanent() const {
    Status s = *this;
    s.permanent_ = !ok();
    return s;
  }

  // Prepends context: "what we were doing: <original message>".
  Status Wrap(const std::string& context) const {
    if (ok()) return *this;
    Status s(code_, context + ": " + message_);
    s.permanent_ = permanent_;
    return s;
  }

  std::string ToString() const;

  friend bool operator==(const Status& a, const Status& b) { return a.code_ == b.code_ && a.message_ == b.message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  bool permanent_ = false;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status Conflict(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

namespace status_internal {
// What a Result holds when it is built from an OK Status: that is a bug in
// the caller (an error path that forgot its error), and a Result holding OK
// would report ok() == false with an empty message. Instead it holds
// Internal("Result built from an OK status (at file:line)") and the mistake
// is logged once per call, in every build type.
Status ResultFromOkStatus(const char* file, int line);
}  // namespace status_internal

// Holds either a value or a non-OK Status. Built from an OK Status it holds
// an Internal error (see status_internal::ResultFromOkStatus), never "OK".
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  // The defaulted arguments name the caller's line for the OK-status report.
  Result(Status status, const char* file = __builtin_FILE(),  // NOLINT: implicit by design
         int line = __builtin_LINE())
      : v_(status.ok() ? status_internal::ResultFromOkStatus(file, line) : std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace nvdra

#define NVDRA_CONCAT_INNER(a, b) a##b
#define NVDRA_CONCAT(a, b) NVDRA_CONCAT_INNER(a, b)

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define NVDRA_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::nvdra::Status nvdra_status_ = (expr);        \
    if (!nvdra_status_.ok()) return nvdra_status_; \
  } while (0)

// NVDRA_ASSIGN_OR_RETURN(auto x, ComputeX());
#define NVDRA_ASSIGN_OR_RETURN(lhs, expr) NVDRA_ASSIGN_OR_RETURN_IMPL(NVDRA_CONCAT(nvdra_result_, __LINE__), lhs, expr)
#define NVDRA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
