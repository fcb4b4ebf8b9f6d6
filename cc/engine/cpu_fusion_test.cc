// Checks of the CPU path's fusion (cpu_fusion.h, cpu_pass.h) against a naive
// convolution written here, with no TensorFlow and no GPU: the input's
// scale-bias(-ReLU) prologue, the statistics epilogue summed over several
// micro-batch splits, a Conv -> BatchNormalization -> ReLU -> Conv chain
// through batch-norm finalize, the bias epilogue, and the refusals.
//   bazel build //cc/engine:cpu_fusion_test && ./bazel-bin/cc/engine/cpu_fusion_test
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "cc/engine/batch_norm.h"
#include "cc/engine/conv_params.h"
#include "cc/engine/cpu_pass.h"
#include "cc/engine/plan.h"
#include "cc/engine/test_checks.h"

using ucudnn_test::Check;

namespace {

using namespace ucudnn;

// Runs fn over shards of two samples, as a thread pool may split the work.
const ParallelFor kShards = [](int64_t units, int64_t,
                               const std::function<void(int64_t, int64_t)>& fn) {
  for (int64_t begin = 0; begin < units; begin += 2) fn(begin, std::min(units, begin + 2));
};

ConvParams Conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                int64_t stride, int64_t dilation, int64_t pad_before, int64_t pad_after,
                int64_t groups, Layout layout) {
  ConvParams p;
  p.batch = n; p.in_channels = c; p.in_height = h; p.in_width = w; p.out_channels = k;
  p.filter_height = r; p.filter_width = s; p.groups = groups;
  p.stride_h = p.stride_w = stride; p.dilation_h = p.dilation_w = dilation;
  p.pad_top = p.pad_left = pad_before; p.pad_bottom = p.pad_right = pad_after;
  p.out_height = ConvOutputSize(h, r, dilation, stride, pad_before, pad_after);
  p.out_width = ConvOutputSize(w, s, dilation, stride, pad_before, pad_after);
  p.layout = layout;
  return p;
}

// The prologue of the input in double: x * scale[c] + bias[c], then ReLU.
std::vector<double> RefPrologue(const ConvParams& p, const std::vector<float>& x,
                                const std::vector<float>& scale, const std::vector<float>& bias,
                                bool relu) {
  int64_t st[4];
  LayoutStrides(p.layout, p.in_channels, p.in_height, p.in_width, st);
  std::vector<double> out(x.size());
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t c = 0; c < p.in_channels; ++c)
      for (int64_t h = 0; h < p.in_height; ++h)
        for (int64_t w = 0; w < p.in_width; ++w) {
          const int64_t i = n * st[0] + c * st[1] + h * st[2] + w * st[3];
          const double y = static_cast<double>(x[i]) * scale[c] + bias[c];
          out[i] = relu ? std::max(y, 0.0) : y;
        }
  return out;
}

// The naive convolution of TF's definition, in double: input and output in
// p.layout, the filter HWIO ([R, S, C/groups, K]), zero padding.
std::vector<double> RefConv(const ConvParams& p, const std::vector<double>& x,
                            const std::vector<float>& f) {
  int64_t si[4], so[4];
  LayoutStrides(p.layout, p.in_channels, p.in_height, p.in_width, si);
  LayoutStrides(p.layout, p.out_channels, p.out_height, p.out_width, so);
  const int64_t cg = p.group_in_channels(), kg = p.group_out_channels();
  std::vector<double> y(p.batch * p.output_sample_size(), 0.0);
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t k = 0; k < p.out_channels; ++k)
      for (int64_t oh = 0; oh < p.out_height; ++oh)
        for (int64_t ow = 0; ow < p.out_width; ++ow) {
          double sum = 0;
          for (int64_t r = 0; r < p.filter_height; ++r)
            for (int64_t s = 0; s < p.filter_width; ++s)
              for (int64_t ci = 0; ci < cg; ++ci) {
                const int64_t ih = oh * p.stride_h - p.pad_top + r * p.dilation_h;
                const int64_t iw = ow * p.stride_w - p.pad_left + s * p.dilation_w;
                if (ih < 0 || ih >= p.in_height || iw < 0 || iw >= p.in_width) continue;
                const int64_t c = (k / kg) * cg + ci;
                sum += x[n * si[0] + c * si[1] + ih * si[2] + iw * si[3]] *
                       f[((r * p.filter_width + s) * cg + ci) * p.out_channels + k];
              }
          y[n * so[0] + k * so[1] + oh * so[2] + ow * so[3]] = sum;
        }
  return y;
}

// Per-channel sum, sum of squares and sum of magnitudes (the scale of the
// sum's rounding) of a [N, P, Q, K] or [N, K, P, Q] output.
struct RefStats {
  std::vector<double> sum, sum_of_squares, magnitude;
};
RefStats RefStatistics(const ConvParams& p, const std::vector<double>& y) {
  int64_t so[4];
  LayoutStrides(p.layout, p.out_channels, p.out_height, p.out_width, so);
  RefStats r{std::vector<double>(p.out_channels), std::vector<double>(p.out_channels),
             std::vector<double>(p.out_channels)};
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t k = 0; k < p.out_channels; ++k)
      for (int64_t oh = 0; oh < p.out_height; ++oh)
        for (int64_t ow = 0; ow < p.out_width; ++ow) {
          const double v = y[n * so[0] + k * so[1] + oh * so[2] + ow * so[3]];
          r.sum[k] += v;
          r.sum_of_squares[k] += v * v;
          r.magnitude[k] += std::fabs(v);
        }
  return r;
}

// Largest |got - want| relative to the largest |want| (norm-wise: an output
// element near zero through cancellation is held to the tensor's scale).
template <typename T>
double RelError(const std::vector<T>& got, const std::vector<double>& want) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(static_cast<float>(got[i])) - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return got.size() == want.size() ? err / scale : 1e30;
}

std::vector<float> Random(std::mt19937* rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(*rng);
  return v;
}

// A plan of micro-batches of these sizes (the CPU ignores the algorithms).
Plan PlanOf(const std::vector<int64_t>& sizes) {
  Plan plan;
  for (int64_t s : sizes) plan.micro_batches.push_back(MicroBatch{s, 0, 0.0, 0});
  return plan;
}

// One forward pass on the CPU path; the statistics where `sum` is given.
template <typename T>
Status Forward(const ConvParams& p, const Plan& plan, const std::vector<T>& x,
               const std::vector<T>& f, std::vector<T>* y, const std::vector<float>* scale,
               const std::vector<float>* bias, std::vector<float>* sum,
               std::vector<float>* sum_of_squares) {
  y->assign(p.batch * p.output_sample_size(), T(0.0f));
  CpuPassTensors t;
  t.a = x.data();
  t.b = f.data();
  t.out = y->data();
  if (scale != nullptr) t.input_scale = scale->data();
  if (bias != nullptr) t.input_bias = bias->data();
  if (sum != nullptr) {
    sum->assign(p.out_channels, -1.0f);
    sum_of_squares->assign(p.out_channels, -1.0f);
    t.sum = sum->data();
    t.sum_of_squares = sum_of_squares->data();
  }
  return RunCpuPlan(plan, Pass::kForward, p, t, kShards);
}

template <typename T>
std::vector<T> Cast(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<T>(v[i]);
  return out;
}

std::vector<double> ToDouble(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

}  // namespace

int main() {
  std::mt19937 rng(50);
  // N = 7: splits 7 (whole), 4 + 3, 3 + 3 + 1 (uneven), 2 + 4 + 1, 1 x 7.
  const std::vector<std::vector<int64_t>> splits = {
      {7}, {4, 3}, {3, 3, 1}, {2, 4, 1}, {1, 1, 1, 1, 1, 1, 1}};
  const ConvParams shapes[] = {
      Conv(7, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, Layout::kNHWC),  // SAME 3x3
      Conv(7, 4, 7, 6, 6, 3, 2, 2, 1, 1, 0, 2, Layout::kNCHW),  // strided, asymmetric, 2 groups
      Conv(7, 2, 8, 8, 3, 3, 3, 1, 2, 2, 1, 1, Layout::kNHWC),  // dilated
  };
  for (const ConvParams& base : shapes) {
    const std::string shape = base.ToString();
    const std::vector<float> x = Random(&rng, base.batch * base.input_sample_size(), -2, 2);
    const std::vector<float> f = Random(&rng, base.filter_size(), -1, 1);
    // Scale and bias as a batch norm gives them: a bias that makes about half
    // the inputs negative before the ReLU, so that it clips.
    const std::vector<float> scale = Random(&rng, base.in_channels, 0.5f, 1.5f);
    const std::vector<float> bias = Random(&rng, base.in_channels, -1, 1);

    for (Prologue prologue : {Prologue::kNone, Prologue::kScaleBias, Prologue::kScaleBiasRelu}) {
      ConvParams p = base;
      p.fusion.prologue = prologue;
      p.fusion.epilogue = Epilogue::kStatistics;
      const bool pro = prologue != Prologue::kNone;
      const std::vector<double> xin =
          pro ? RefPrologue(p, x, scale, bias, p.fusion.input_relu()) : ToDouble(x);
      const std::vector<double> want = RefConv(p, xin, f);
      const RefStats stats = RefStatistics(p, want);
      std::vector<float> first;
      for (const auto& sizes : splits) {
        std::vector<float> y, sum, sq;
        const Status status = Forward<float>(p, PlanOf(sizes), x, f, &y, pro ? &scale : nullptr,
                                             pro ? &bias : nullptr, &sum, &sq);
        std::string split;
        for (int64_t size : sizes) split += (split.empty() ? "" : "+") + std::to_string(size);
        const std::string what = shape + " " + p.fusion.Name() + " in micro-batches " + split;
        Check(status.ok(), ("runs: " + what + " " + status.message()).c_str());
        Check(RelError(y, want) <= 1e-5,
              ("output within 1e-5 of the naive convolution: " + what).c_str());
        if (first.empty()) first = y;
        Check(y == first,
              ("a sample's output does not depend on its micro-batch: " + what).c_str());
        bool sums = sum.size() == stats.sum.size();
        for (size_t k = 0; sums && k < sum.size(); ++k) {
          sums = std::fabs(sum[k] - stats.sum[k]) <= 1e-5 * stats.magnitude[k] &&
                 std::fabs(sq[k] - stats.sum_of_squares[k]) <= 1e-5 * stats.sum_of_squares[k];
        }
        Check(sums, ("the micro-batches' statistics are the mini-batch's: " + what).c_str());
      }
    }
  }

  // The ReLU clips: the prologue with it differs from the one without.
  {
    const ConvParams p = shapes[0];
    const std::vector<float> x = Random(&rng, p.batch * p.input_sample_size(), -2, 2);
    const std::vector<float> scale(p.in_channels, 1.0f), bias(p.in_channels, -0.5f);
    const std::vector<double> a = RefPrologue(p, x, scale, bias, false);
    const std::vector<double> b = RefPrologue(p, x, scale, bias, true);
    Check(a != b && *std::min_element(b.begin(), b.end()) == 0.0,
          "the test's inputs are negative after scale and bias, so the ReLU clips");
  }

  // Conv -> BatchNormalization -> ReLU -> Conv as the fused path runs it: the
  // first convolution's statistics (micro-batches 3 + 3 + 1), finalize, and
  // the second convolution's prologue, against the unfused chain in double
  // (Keras' training-mode batch norm: two-pass batch moments).
  {
    const ConvParams c1 = Conv(7, 3, 6, 6, 5, 3, 3, 1, 1, 1, 1, 1, Layout::kNHWC);
    ConvParams c2 = Conv(7, 5, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, Layout::kNHWC);
    ConvParams p1 = c1;
    p1.fusion.epilogue = Epilogue::kStatistics;
    c2.fusion.prologue = Prologue::kScaleBiasRelu;
    const std::vector<float> x = Random(&rng, c1.batch * c1.input_sample_size(), -2, 2);
    const std::vector<float> f1 = Random(&rng, c1.filter_size(), -1, 1);
    const std::vector<float> f2 = Random(&rng, c2.filter_size(), -1, 1);
    BatchNormLayer layer;
    layer.gamma = Random(&rng, 5, 0.5f, 1.5f);
    layer.beta = Random(&rng, 5, -0.5f, 0.5f);
    layer.moving_mean.assign(5, 0.0f);
    layer.moving_variance.assign(5, 1.0f);
    std::vector<float> y1, y2, sum, sq;
    const Plan plan = PlanOf({3, 3, 1});
    bool ok = Forward<float>(p1, plan, x, f1, &y1, nullptr, nullptr, &sum, &sq).ok();
    BatchNormStatistics st{sum, sq, c1.batch * c1.out_height * c1.out_width};
    BatchNormFinalized bn;
    ok = ok && FinalizeBatchNorm(st, layer, &bn).ok() &&
         Forward<float>(c2, plan, y1, f2, &y2, &bn.scale, &bn.bias, nullptr, nullptr).ok();
    // The unfused chain in double.
    const std::vector<double> r1 = RefConv(c1, ToDouble(x), f1);
    const int64_t count = st.count;
    std::vector<double> mean(5, 0.0), var(5, 0.0), normalized(r1.size());
    for (size_t i = 0; i < r1.size(); ++i) mean[i % 5] += r1[i] / count;
    for (size_t i = 0; i < r1.size(); ++i) {
      var[i % 5] += (r1[i] - mean[i % 5]) * (r1[i] - mean[i % 5]) / count;
    }
    for (size_t i = 0; i < r1.size(); ++i) {
      const int k = i % 5;
      const double v = layer.gamma[k] * (r1[i] - mean[k]) / std::sqrt(var[k] + layer.epsilon) +
                       layer.beta[k];
      normalized[i] = std::max(v, 0.0);
    }
    const std::vector<double> r2 = RefConv(c2, normalized, f2);
    Check(ok, "the fused chain runs");
    Check(RelError(y2, r2) <= 1e-5,
          "conv + statistics, finalize, prologue + conv: the unfused chain's output within 1e-5");
    bool moving = true;
    for (int k = 0; k < 5; ++k) {
      moving &= std::fabs(bn.moving_mean[k] - 0.01 * mean[k]) <=
                    1e-5 * std::max(1.0, std::fabs(mean[k])) &&
                std::fabs(bn.moving_variance[k] - (0.99 + 0.01 * var[k])) <= 1e-5 * (1 + var[k]);
    }
    Check(moving, "the moving statistics from the fused statistics are Keras' update");
  }

  // bfloat16 and float16: the prologue's output rounded to T, the GEMM in
  // float32; held to the unfused result within a few roundings of T.
  {
    ConvParams p = shapes[0];
    p.fusion.prologue = Prologue::kScaleBiasRelu;
    p.fusion.epilogue = Epilogue::kStatistics;
    const std::vector<float> x = Random(&rng, p.batch * p.input_sample_size(), -2, 2);
    const std::vector<float> f = Random(&rng, p.filter_size(), -1, 1);
    const std::vector<float> scale = Random(&rng, p.in_channels, 0.5f, 1.5f);
    const std::vector<float> bias = Random(&rng, p.in_channels, -1, 1);
    std::vector<float> xr(x.size()), fr(f.size());
    for (DType dtype : {DType::kBFloat16, DType::kHalf}) {
      p.dtype = dtype;
      const double tolerance = dtype == DType::kBFloat16 ? 3e-2 : 4e-3;
      std::vector<float> y, sum, sq;
      // The pass in T (`zero`'s type): the inputs rounded to T, as the
      // reference takes them, and the output back in float.
      auto run_in = [&](auto zero) {
        using T = decltype(zero);
        const auto xt = Cast<T>(x), ft = Cast<T>(f);
        std::vector<T> yt;
        const bool ran = Forward(p, PlanOf({3, 3, 1}), xt, ft, &yt, &scale, &bias, &sum, &sq).ok();
        for (size_t i = 0; i < x.size(); ++i) xr[i] = static_cast<float>(xt[i]);
        for (size_t i = 0; i < f.size(); ++i) fr[i] = static_cast<float>(ft[i]);
        for (auto v : yt) y.push_back(static_cast<float>(v));
        return ran;
      };
      const bool ok = dtype == DType::kBFloat16 ? run_in(Eigen::bfloat16(0.0f))
                                                : run_in(Eigen::half(0.0f));
      const std::vector<double> want = RefConv(p, RefPrologue(p, xr, scale, bias, true), fr);
      const RefStats stats = RefStatistics(p, want);
      bool sums = true;
      for (int64_t k = 0; k < p.out_channels; ++k) {
        sums &= std::fabs(sum[k] - stats.sum[k]) <= tolerance * stats.magnitude[k];
      }
      Check(ok && RelError(y, want) <= tolerance && sums,
            (std::string(DTypeName(dtype)) + ": prologue, convolution and statistics").c_str());
    }
  }

  // The bias epilogue after a prologue: y = relu(conv(relu(x * s + b)) + bias).
  {
    ConvParams p = shapes[1];
    p.fusion.prologue = Prologue::kScaleBiasRelu;
    p.fusion.epilogue = Epilogue::kBiasRelu;
    const std::vector<float> x = Random(&rng, p.batch * p.input_sample_size(), -2, 2);
    const std::vector<float> f = Random(&rng, p.filter_size(), -1, 1);
    const std::vector<float> scale = Random(&rng, p.in_channels, 0.5f, 1.5f);
    const std::vector<float> in_bias = Random(&rng, p.in_channels, -1, 1);
    const std::vector<float> out_bias = Random(&rng, p.out_channels, -2, 1);
    std::vector<double> want = RefConv(p, RefPrologue(p, x, scale, in_bias, true), f);
    const int64_t pixels = p.out_height * p.out_width;
    for (size_t i = 0; i < want.size(); ++i) {
      want[i] = std::max(want[i] + out_bias[(i / pixels) % p.out_channels], 0.0);  // NCHW
    }
    std::vector<float> y(want.size());
    CpuPassTensors t;
    t.a = x.data(); t.b = f.data(); t.out = y.data(); t.bias = out_bias.data();
    t.input_scale = scale.data(); t.input_bias = in_bias.data();
    Check(RunCpuPlan(PlanOf({4, 3}), Pass::kForward, p, t, kShards).ok() &&
              RelError(y, want) <= 1e-5,
          "a prologue and the bias + ReLU epilogue in one pass");
  }

  // Refusals, and an empty convolution's statistics.
  {
    ConvParams p = shapes[0];
    p.fusion.prologue = Prologue::kScaleBias;
    std::vector<float> buffer(p.batch * std::max(p.input_sample_size(), p.output_sample_size()));
    std::vector<float> filter(p.filter_size()), scale(p.in_channels, 1.0f);
    CpuPassTensors t;
    t.a = buffer.data(); t.b = filter.data(); t.out = buffer.data();
    t.input_scale = scale.data(); t.input_bias = scale.data();
    Status s = RunCpuPlan(PlanOf({7}), Pass::kBackwardData, p, t, kShards);
    Check(!s.ok() && s.code() == Status::Code::kInvalidArgument &&
              s.message().find("runs on the forward pass only, not backward-data") !=
                  std::string::npos,
          "a prologue on backward-data is refused");
    t.input_bias = nullptr;
    s = RunCpuPlan(PlanOf({7}), Pass::kForward, p, t, kShards);
    Check(!s.ok() && s.message().find("needs its scale and bias tensors") != std::string::npos,
          "a prologue without its bias tensor is refused");
    t.input_bias = scale.data();
    s = RunCpuPlan(PlanOf({4, 2}), Pass::kForward, p, t, kShards);
    Check(!s.ok() && s.message() == "a CPU plan of 6 samples for a mini-batch of 7",
          "a plan that does not cover the mini-batch is refused");
    p.fusion = Fusion();
    p.fusion.epilogue = Epilogue::kStatistics;
    s = RunCpuPlan(PlanOf({7}), Pass::kForward, p, t, kShards);
    Check(!s.ok() && s.message().find("needs its sum and sum-of-squares tensors") !=
                         std::string::npos,
          "statistics without their tensors are refused");

    ConvParams empty = shapes[0];
    empty.in_channels = 0;
    empty.fusion.epilogue = Epilogue::kStatistics;
    std::vector<float> y(empty.batch * empty.output_sample_size(), 5.0f), sum, sq;
    s = Forward<float>(empty, Plan(), std::vector<float>(), filter, &y, nullptr, nullptr, &sum,
                       &sq);
    Check(s.ok() && std::all_of(y.begin(), y.end(), [](float v) { return v == 0.0f; }) &&
              std::all_of(sum.begin(), sum.end(), [](float v) { return v == 0.0f; }) &&
              std::all_of(sq.begin(), sq.end(), [](float v) { return v == 0.0f; }),
          "an empty convolution's statistics are zero sums of a zero output");
    empty.fusion = Fusion();
    s = RunCpuPlan(Plan(), Pass::kForward, empty, t, kShards);
    Check(!s.ok() && s.message().rfind("an empty convolution has nothing to run", 0) == 0,
          "an empty convolution with no fusion is refused");
  }
  return ucudnn_test::Summary("cpu_fusion_test");
}
