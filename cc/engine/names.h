// A knob's values and their names, in one table for parsing and printing
// (planner.cc, knobs.cc). No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_NAMES_H_
#define TF_UCUDNN_ENGINE_NAMES_H_

#include <cstddef>
#include <string>
#include <utility>

namespace ucudnn {

template <typename T>
using Name = std::pair<const char*, T>;

// Sets *out to the value named `text`; false (leaving *out) if none is.
template <typename T, size_t N>
bool ParseName(const Name<T> (&names)[N], const std::string& text, T* out) {
  for (const auto& [name, value] : names) {
    if (text == name) {
      *out = value;
      return true;
    }
  }
  return false;
}

template <typename T, size_t N>
const char* NameOf(const Name<T> (&names)[N], T value) {
  for (const auto& [name, v] : names) {
    if (v == value) return name;
  }
  return "?";
}

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_NAMES_H_
