// UCUDNN_DEBUG_OUTPUT (μ-cuDNN's name): when set to anything but "" or "0",
// plans and the cost of planning each kernel are printed to stderr.
#ifndef TF_UCUDNN_ENGINE_DEBUG_OUTPUT_H_
#define TF_UCUDNN_ENGINE_DEBUG_OUTPUT_H_

#include <cstdlib>
#include <cstring>

namespace ucudnn {

inline bool DebugOutput() {
  static const bool on = [] {
    const char* env = std::getenv("UCUDNN_DEBUG_OUTPUT");
    return env != nullptr && *env != '\0' && std::strcmp(env, "0") != 0;
  }();
  return on;
}

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_DEBUG_OUTPUT_H_
