// cudnn-frontend includes "third_party/gpus/cudnn/cudnn.h", TensorFlow's own
// path; the pip wheel ships cuDNN's headers under another one (see
// third_party/tf/tf_configure.bzl). Angle brackets: not this file again.
#ifndef TF_UCUDNN_THIRD_PARTY_GPUS_CUDNN_CUDNN_H_
#define TF_UCUDNN_THIRD_PARTY_GPUS_CUDNN_CUDNN_H_
#include <cudnn.h>
#endif  // TF_UCUDNN_THIRD_PARTY_GPUS_CUDNN_CUDNN_H_
