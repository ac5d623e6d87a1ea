// Status and StatusOr<T>: kiln's error values. Every fallible function returns one; nothing aborts
// on bad input. Messages follow "failed to <verb> <op> node '<name>' (opset N): <rule>; got
// <value>" and gain context on the way up ("while loading resnet50.onnx"). Thread-safety: values,
// copyable.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kiln {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kInvalidModel = 2,
  kUnsupported = 3,
  kNotFound = 4,
  kOutOfMemory = 5,
  kDeviceError = 6,
  kUnavailable = 7,
  kDeadlineExceeded = 8,
  kCancelled = 9,
  kInternal = 10,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::vector<std::string>& context() const { return context_; }

  // Adds a line of context ("while loading x.onnx"); returns *this for chaining.
  Status& AddContext(std::string context) &;
  Status&& AddContext(std::string context) &&;

  // "<CodeName>: message (while ...; while ...)".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::vector<std::string> context_;
};

inline Status OkStatus() { return Status(); }
Status InvalidArgument(std::string message);
Status InvalidModel(std::string message);
Status Unsupported(std::string message);
Status NotFound(std::string message);
Status Internal(std::string message);
Status DeviceError(std::string message);
Status Unavailable(std::string message);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design

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
  std::variant<Status, T> v_;
};

}  // namespace kiln

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

#define KILN_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::kiln::Status kiln_status_ = (expr);        \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)

#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_statusor_, __LINE__), lhs, expr)
