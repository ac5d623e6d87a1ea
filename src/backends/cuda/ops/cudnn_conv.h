// What cuDNN's convolution and transposed convolution share: the descriptors of one 2-D
// convolution and the choice of its algorithm.
//
// CudnnConvDescriptors holds them in the forward convolution's roles: `x` its input, `w` its
// filter, `y` its output. A transposed convolution is that convolution's backward-data pass, so
// its input is described as `y` and its output as `x`. Created once per shape in Prepare,
// destroyed with the kernel.
//
// ChooseCudnnAlgo picks the algorithm: the plan cache's earlier choice ("algo N") under
// SessionOptions::tune, else cuDNN's exhaustive search under tune, else cuDNN's heuristics; then
// the first candidate whose workspace fits (PickCudnnAlgo).
#pragma once

#include <cstdio>
#include <string>

#include "backends/cuda/ops/cuda_kernel.h"

namespace kiln::cuda {

class CudnnConvDescriptors {
 public:
  CudnnConvDescriptors() = default;
  CudnnConvDescriptors(const CudnnConvDescriptors&) = delete;
  CudnnConvDescriptors& operator=(const CudnnConvDescriptors&) = delete;
  ~CudnnConvDescriptors() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }

  // NCHW shapes; pads, strides and dilations as {h, w}; accumulation in float32.
  Status Create(const Shape& xs, const Shape& ws, const Shape& ys, const int64_t pads[2],
                const int64_t strides[2], const int64_t dilations[2], int group, cudnnDataType_t dt,
                cudnnMathType_t math) {
    auto i = [](int64_t v) { return static_cast<int>(v); };
    KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    KILN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    KILN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    KILN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, dt, i(xs[0]), i(xs[1]),
                                                i(xs[2]), i(xs[3])));
    KILN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, dt, i(ys[0]), i(ys[1]),
                                                i(ys[2]), i(ys[3])));
    KILN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, dt, CUDNN_TENSOR_NCHW, i(ws[0]), i(ws[1]),
                                                i(ws[2]), i(ws[3])));
    KILN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        conv, i(pads[0]), i(pads[1]), i(strides[0]), i(strides[1]), i(dilations[0]),
        i(dilations[1]), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    KILN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, group));
    KILN_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math));
    return OkStatus();
  }

  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
};

// `find` and `heuristic` have the shape of cudnnFindConvolution*Algorithm and
// cudnnGetConvolution*Algorithm_v7 with the handle and descriptors bound:
// (int requested, int* returned, Perf* perf) -> cudnnStatus_t. `workspace` is as in
// PickCudnnAlgo. Sets *tuned when the algorithm came from a measurement (search or cache).
template <typename Perf, typename Algo, typename Find, typename Heuristic, typename Workspace>
Status ChooseCudnnAlgo(const runtime::PrepareContext& ctx, Find find, Heuristic heuristic,
                       Workspace workspace, Algo* algo, size_t* bytes, bool* tuned) {
  constexpr int kRequested = 8;
  Perf perf[kRequested];
  int returned = 0, cached = -1;
  if (ctx.tune && ctx.cached_variant &&
      std::sscanf(ctx.cached_variant->c_str(), "algo %d", &cached) == 1) {
    perf[0].algo = static_cast<Algo>(cached);
    perf[0].status = CUDNN_STATUS_SUCCESS;
    returned = 1;
  } else if (ctx.tune) {  // exhaustive: every algorithm timed on the device
    KILN_RETURN_IF_ERROR(
        CheckCudnn(find(kRequested, &returned, perf), "cudnnFindConvolution*Algorithm"));
  } else {
    KILN_RETURN_IF_ERROR(
        CheckCudnn(heuristic(kRequested, &returned, perf), "cudnnGetConvolution*Algorithm_v7"));
  }
  *tuned = ctx.tune;
  return PickCudnnAlgo(perf, returned, workspace, algo, bytes);
}

// The kernel-name suffix of a measured choice ("algo 1"), or "" for the heuristic's.
inline std::string AlgoVariant(bool tuned, int algo) {
  return tuned ? "algo " + std::to_string(algo) : "";
}

}  // namespace kiln::cuda
