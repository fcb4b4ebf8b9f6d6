// The checks of the engine's plain C++ tests (planner_test, knobs_test): each
// failed Check prints what it checked, and Summary gives main's exit status.
#ifndef TF_UCUDNN_ENGINE_TEST_CHECKS_H_
#define TF_UCUDNN_ENGINE_TEST_CHECKS_H_

#include <cstdio>

namespace ucudnn_test {

inline int& Failures() {
  static int failures = 0;
  return failures;
}

inline void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++Failures();
  }
}

// Prints "<test>: all checks passed" or "<test>: FAILED"; 0 or 1 for main.
inline int Summary(const char* test) {
  std::printf("%s: %s\n", test, Failures() == 0 ? "all checks passed" : "FAILED");
  return Failures() == 0 ? 0 : 1;
}

}  // namespace ucudnn_test

#endif  // TF_UCUDNN_ENGINE_TEST_CHECKS_H_
