// A small status type so that the engine needs no TensorFlow headers; the TF
// glue (cc/kernels/) turns it into absl::Status with the same code.
#ifndef TF_UCUDNN_ENGINE_STATUS_H_
#define TF_UCUDNN_ENGINE_STATUS_H_

#include <string>
#include <utility>

namespace ucudnn {

class Status {
 public:
  enum class Code { kOk, kInvalidArgument, kResourceExhausted, kInternal };

  Status() = default;
  static Status InvalidArgument(std::string message) {
    return Status(Code::kInvalidArgument, std::move(message));
  }
  static Status ResourceExhausted(std::string message) {
    return Status(Code::kResourceExhausted, std::move(message));
  }
  static Status Internal(std::string message) {
    return Status(Code::kInternal, std::move(message));
  }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

#define UCUDNN_RETURN_IF_ERROR(expr)      \
  do {                                    \
    ::ucudnn::Status _status = (expr);    \
    if (!_status.ok()) return _status;    \
  } while (0)

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_STATUS_H_
