#include "cc/engine/cpu_backend.h"

#include <limits>
#include <mutex>
#include <vector>

#include "Eigen/Core"

namespace ucudnn {
namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Offsets of one sample's elements in the caller's layout.
struct SampleIndex {
  int64_t c_stride, h_stride, w_stride;  // in elements
  SampleIndex(Layout layout, int64_t channels, int64_t height, int64_t width) {
    if (layout == Layout::kNHWC) {
      c_stride = 1; w_stride = channels; h_stride = width * channels;
    } else {
      w_stride = 1; h_stride = width; c_stride = height * width;
    }
  }
  int64_t operator()(int64_t c, int64_t h, int64_t w) const {
    return c * c_stride + h * h_stride + w * w_stride;
  }
};

// Rows (p, q) x columns (r, s, ci) of group g of one input sample; zero outside.
template <typename T>
void Im2Col(const ConvParams& p, const T* sample, int64_t g, Matrix* col) {
  const SampleIndex in(p.layout, p.in_channels, p.in_height, p.in_width);
  const int64_t cg = p.group_in_channels();
  col->resize(p.out_height * p.out_width, p.filter_height * p.filter_width * cg);
  for (int64_t oh = 0; oh < p.out_height; ++oh) {
    for (int64_t ow = 0; ow < p.out_width; ++ow) {
      float* row = col->data() + (oh * p.out_width + ow) * col->cols();
      for (int64_t r = 0; r < p.filter_height; ++r) {
        const int64_t ih = oh * p.stride_h - p.pad_top + r * p.dilation_h;
        for (int64_t s = 0; s < p.filter_width; ++s) {
          const int64_t iw = ow * p.stride_w - p.pad_left + s * p.dilation_w;
          float* dst = row + (r * p.filter_width + s) * cg;
          if (ih < 0 || ih >= p.in_height || iw < 0 || iw >= p.in_width) {
            std::fill(dst, dst + cg, 0.0f);
            continue;
          }
          for (int64_t ci = 0; ci < cg; ++ci) {
            dst[ci] = static_cast<float>(sample[in(g * cg + ci, ih, iw)]);
          }
        }
      }
    }
  }
}

// Adds the rows (p, q) x columns (r, s, ci) of `col` back into a float sample
// gradient stored channels-last ([H, W, C]).
void Col2ImAdd(const ConvParams& p, const Matrix& col, int64_t g, float* sample_hwc) {
  const int64_t cg = p.group_in_channels();
  for (int64_t oh = 0; oh < p.out_height; ++oh) {
    for (int64_t ow = 0; ow < p.out_width; ++ow) {
      const float* row = col.data() + (oh * p.out_width + ow) * col.cols();
      for (int64_t r = 0; r < p.filter_height; ++r) {
        const int64_t ih = oh * p.stride_h - p.pad_top + r * p.dilation_h;
        if (ih < 0 || ih >= p.in_height) continue;
        for (int64_t s = 0; s < p.filter_width; ++s) {
          const int64_t iw = ow * p.stride_w - p.pad_left + s * p.dilation_w;
          if (iw < 0 || iw >= p.in_width) continue;
          const float* src = row + (r * p.filter_width + s) * cg;
          float* dst = sample_hwc + (ih * p.in_width + iw) * p.in_channels + g * cg;
          for (int64_t ci = 0; ci < cg; ++ci) dst[ci] += src[ci];
        }
      }
    }
  }
}

// Output sample (or its gradient) as a float [P*Q, K] matrix, and back.
template <typename T>
void LoadOutputSample(const ConvParams& p, const T* sample, Matrix* m) {
  const SampleIndex out(p.layout, p.out_channels, p.out_height, p.out_width);
  m->resize(p.out_height * p.out_width, p.out_channels);
  for (int64_t oh = 0; oh < p.out_height; ++oh)
    for (int64_t ow = 0; ow < p.out_width; ++ow)
      for (int64_t k = 0; k < p.out_channels; ++k)
        (*m)(oh * p.out_width + ow, k) = static_cast<float>(sample[out(k, oh, ow)]);
}

template <typename T>
void StoreOutputSample(const ConvParams& p, const Matrix& m, T* sample) {
  const SampleIndex out(p.layout, p.out_channels, p.out_height, p.out_width);
  for (int64_t oh = 0; oh < p.out_height; ++oh)
    for (int64_t ow = 0; ow < p.out_width; ++ow)
      for (int64_t k = 0; k < p.out_channels; ++k)
        sample[out(k, oh, ow)] = static_cast<T>(m(oh * p.out_width + ow, k));
}

// The filter as a float [R*S*C/groups, K] matrix (HWIO is already that, row-major).
template <typename T>
Matrix LoadFilter(const ConvParams& p, const T* filter) {
  Matrix m(p.filter_height * p.filter_width * p.group_in_channels(), p.out_channels);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(filter[i]);
  return m;
}

// Multiply-adds per sample, a hint for the thread pool's sharding: saturates
// instead of overflowing (the product of the output and filter sizes can
// exceed 2^63 even where each tensor fits).
int64_t SampleCost(const ConvParams& p) {
  int64_t cost = 1;
  for (int64_t v : {p.out_height, p.out_width, p.filter_height, p.filter_width,
                    p.group_in_channels(), p.out_channels}) {
    if (__builtin_mul_overflow(cost, v, &cost)) return std::numeric_limits<int64_t>::max();
  }
  return cost;
}

}  // namespace

template <typename T>
void CpuForward(const ConvParams& p, int64_t size, const T* input, const T* filter,
                T* output, const ParallelFor& parallel_for) {
  const Matrix w = LoadFilter(p, filter);
  const int64_t kg = p.group_out_channels();
  parallel_for(size, SampleCost(p), [&](int64_t begin, int64_t end) {
    Matrix col, out(p.out_height * p.out_width, p.out_channels);
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t g = 0; g < p.groups; ++g) {
        Im2Col(p, input + n * p.input_sample_size(), g, &col);
        out.middleCols(g * kg, kg).noalias() = col * w.middleCols(g * kg, kg);
      }
      StoreOutputSample(p, out, output + n * p.output_sample_size());
    }
  });
}

template <typename T>
void CpuBackwardData(const ConvParams& p, int64_t size, const T* out_backprop,
                     const T* filter, T* in_backprop, const ParallelFor& parallel_for) {
  const Matrix w = LoadFilter(p, filter);
  const int64_t kg = p.group_out_channels();
  const SampleIndex in(p.layout, p.in_channels, p.in_height, p.in_width);
  parallel_for(size, SampleCost(p), [&](int64_t begin, int64_t end) {
    Matrix dy, col;
    std::vector<float> dx_hwc(p.input_sample_size());
    for (int64_t n = begin; n < end; ++n) {
      LoadOutputSample(p, out_backprop + n * p.output_sample_size(), &dy);
      std::fill(dx_hwc.begin(), dx_hwc.end(), 0.0f);
      for (int64_t g = 0; g < p.groups; ++g) {
        col.noalias() = dy.middleCols(g * kg, kg) * w.middleCols(g * kg, kg).transpose();
        Col2ImAdd(p, col, g, dx_hwc.data());
      }
      T* dst = in_backprop + n * p.input_sample_size();
      for (int64_t h = 0; h < p.in_height; ++h)
        for (int64_t x = 0; x < p.in_width; ++x)
          for (int64_t c = 0; c < p.in_channels; ++c)
            dst[in(c, h, x)] = static_cast<T>(dx_hwc[(h * p.in_width + x) * p.in_channels + c]);
    }
  });
}

template <typename T>
void CpuBackwardFilter(const ConvParams& p, int64_t size, const T* input,
                       const T* out_backprop, float* filter_backprop, bool accumulate,
                       const ParallelFor& parallel_for) {
  const int64_t kg = p.group_out_channels();
  const int64_t rows = p.filter_height * p.filter_width * p.group_in_channels();
  Matrix total = Matrix::Zero(rows, p.out_channels);
  std::mutex mu;
  parallel_for(size, SampleCost(p), [&](int64_t begin, int64_t end) {
    Matrix partial = Matrix::Zero(rows, p.out_channels), col, dy;
    for (int64_t n = begin; n < end; ++n) {
      LoadOutputSample(p, out_backprop + n * p.output_sample_size(), &dy);
      for (int64_t g = 0; g < p.groups; ++g) {
        Im2Col(p, input + n * p.input_sample_size(), g, &col);
        partial.middleCols(g * kg, kg).noalias() += col.transpose() * dy.middleCols(g * kg, kg);
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    total += partial;
  });
  for (int64_t i = 0; i < total.size(); ++i) {
    filter_backprop[i] = accumulate ? filter_backprop[i] + total.data()[i] : total.data()[i];
  }
}

template <typename T>
void CpuStoreFilter(const ConvParams& p, const float* filter_backprop, T* out) {
  const int64_t n = p.filter_size();
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(filter_backprop[i]);
}

#define UCUDNN_INSTANTIATE_CPU(T)                                                      \
  template void CpuForward<T>(const ConvParams&, int64_t, const T*, const T*, T*,      \
                              const ParallelFor&);                                     \
  template void CpuBackwardData<T>(const ConvParams&, int64_t, const T*, const T*, T*, \
                                   const ParallelFor&);                                \
  template void CpuBackwardFilter<T>(const ConvParams&, int64_t, const T*, const T*,   \
                                     float*, bool, const ParallelFor&);                \
  template void CpuStoreFilter<T>(const ConvParams&, const float*, T*);

UCUDNN_INSTANTIATE_CPU(float)
UCUDNN_INSTANTIATE_CPU(Eigen::half)
UCUDNN_INSTANTIATE_CPU(Eigen::bfloat16)

}  // namespace ucudnn
