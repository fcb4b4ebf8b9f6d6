// What one cuDNN kernel is: the pass, the convolution, and the numerics and
// candidate knobs it was created with; and the padding geometry cuDNN sees
// for it. Values shared by the autotuner, the plan runner and the kernel
// cache entry. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_KERNEL_SPEC_H_
#define TF_UCUDNN_ENGINE_KERNEL_SPEC_H_

#include <algorithm>
#include <cstdint>

#include "cc/engine/conv_params.h"
#include "cc/engine/knobs.h"

namespace ucudnn {

// One convolution kernel (pass + geometry + numerics) and its candidate set:
// `engines` and `graph` as read when the kernel was created (knobs.h).
struct KernelSpec {
  Pass pass = Pass::kForward;
  ConvParams params;
  bool allow_tf32 = true;
  bool deterministic = false;
  EngineSet engines = EngineSet::kAuto;
  GraphSearchKnobs graph;
};

// cuDNN sees symmetric padding; the extra rows and columns of asymmetric
// padding are padded explicitly (a zeroed buffer of padded_h x padded_w
// pixels per channel and sample).
struct PaddedGeometry {
  PaddedGeometry() = default;
  explicit PaddedGeometry(const ConvParams& p)
      : sym_pad_h(std::min(p.pad_top, p.pad_bottom)),
        sym_pad_w(std::min(p.pad_left, p.pad_right)),
        extra_top(p.pad_top - sym_pad_h),
        extra_left(p.pad_left - sym_pad_w),
        padded_h(p.in_height + (p.pad_top + p.pad_bottom - 2 * sym_pad_h)),
        padded_w(p.in_width + (p.pad_left + p.pad_right - 2 * sym_pad_w)),
        padded_sample_elems(p.in_channels * padded_h * padded_w) {}

  int64_t sym_pad_h = 0, sym_pad_w = 0;    // what cuDNN pads on each side
  int64_t extra_top = 0, extra_left = 0;   // padded explicitly before the image
  int64_t padded_h = 0, padded_w = 0;      // the image as cuDNN sees it
  int64_t padded_sample_elems = 0;         // elements of one padded input sample
};

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_KERNEL_SPEC_H_
