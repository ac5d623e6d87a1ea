#include "kiln/status.h"

namespace kiln {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kInvalidModel:
      return "InvalidModel";
    case StatusCode::kUnsupported:
      return "Unsupported";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kOutOfMemory:
      return "OutOfMemory";
    case StatusCode::kDeviceError:
      return "DeviceError";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kDeadlineExceeded:
      return "DeadlineExceeded";
    case StatusCode::kCancelled:
      return "Cancelled";
    case StatusCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

Status& Status::AddContext(std::string context) & {
  context_.push_back(std::move(context));
  return *this;
}

Status&& Status::AddContext(std::string context) && {
  context_.push_back(std::move(context));
  return std::move(*this);
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s = std::string(StatusCodeName(code_)) + ": " + message_;
  for (const auto& c : context_) s += "\n  " + c;
  return s;
}

Status InvalidArgument(std::string message) {
  return Status(StatusCode::kInvalidArgument, std::move(message));
}
Status InvalidModel(std::string message) {
  return Status(StatusCode::kInvalidModel, std::move(message));
}
Status Unsupported(std::string message) {
  return Status(StatusCode::kUnsupported, std::move(message));
}
Status NotFound(std::string message) { return Status(StatusCode::kNotFound, std::move(message)); }
Status Internal(std::string message) { return Status(StatusCode::kInternal, std::move(message)); }
Status DeviceError(std::string message) {
  return Status(StatusCode::kDeviceError, std::move(message));
}
Status Unavailable(std::string message) {
  return Status(StatusCode::kUnavailable, std::move(message));
}

}  // namespace kiln
