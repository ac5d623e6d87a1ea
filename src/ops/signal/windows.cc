// HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix (opset 17): generators whose
// output length is set by an input value (known before the run; ShapeInputs). Values in double,
// stored in output_datatype (default float32; any numeric dtype kiln stores).
//
// Windows: size (int32/int64 scalar, >= 0) values w[n], n < size, over N = size (periodic = 1,
// the default) or size - 1 (periodic = 0):
//   Hann      sin^2(pi n / N)
//   Hamming   25/46 - 21/46 cos(2 pi n / N)
//   Blackman  0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)
// A symmetric window of size 1 (N = 0) is [1].
// MelWeightMatrix: inputs num_mel_bins, dft_length, sample_rate (int scalars),
// lower_edge_hertz, upper_edge_hertz (float scalars); output [dft_length / 2 + 1, num_mel_bins]
// of triangular filters with peak 1, computed as ONNX's reference does: num_mel_bins + 2 points
// evenly spaced by (mel(upper) - mel(lower)) / (num_mel_bins + 2) from mel(lower) (mel(f) =
// 2595 log10(1 + f / 700), in float32 as ONNX's reference), mapped back to hertz and to bins as
// floor((dft_length + 1) * f / sample_rate); filter i rises from point i to point i + 1 and
// falls to point i + 2.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>

#include "ops/common.h"
#include "ops/op_cases.h"
#include "ops/tensor/tensor_util.h"

namespace kiln::ops {
namespace {

enum class WindowKind { kHann, kHamming, kBlackman };

struct GeneratorAttrs : ir::OpAttrs {
  DataType dtype = DataType::kFloat;
  bool periodic = true;  // windows
};

// output_datatype: a dtype StoreAsDtype writes.
Status ParseOutputDtype(const ir::Node& node, GeneratorAttrs* a) {
  const int64_t t = node.GetInt("output_datatype", 1);
  a->dtype = static_cast<DataType>(t);
  unsigned char probe[8];
  if (t < 1 || t > 16 || !StoreAsDtype(a->dtype, 0.0, probe) || DataTypeSize(a->dtype) == 0)
    return ir::AttrError(
        node, "output_datatype must be a numeric dtype kiln stores; got " + std::to_string(t));
  return OkStatus();
}

// Stores n values f(i) as dtype at dst.
template <typename F>
void StoreAll(DataType dtype, int64_t n, void* dst, F&& f) {
  auto* d = static_cast<unsigned char*>(dst);
  const size_t esz = DataTypeSize(dtype);
  for (int64_t i = 0; i < n; ++i) StoreAsDtype(dtype, f(i), d + i * esz);
}

template <WindowKind kKind>
class WindowOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    std::unique_ptr<WindowOp> op(new WindowOp(node));
    KILN_RETURN_IF_ERROR(ParseOutputDtype(node, &op->a_));
    const int64_t p = node.GetInt("periodic", 1);
    if (p != 0 && p != 1)
      return ir::AttrError(node, "periodic must be 0 or 1; got " + std::to_string(p));
    op->a_.periodic = p == 1;
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  std::vector<int> ShapeInputs() const override { return {0}; }

  Status Infer(ir::InferContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> size, KnownInts(ctx, 0, "size"));
    if (size.size() != 1 || size[0] < 0)
      return ctx.Error("size must be a scalar >= 0; got " + IntsToString(size));
    ctx.SetOutput(0, a_.dtype, {size[0]});
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    Tensor& y = ctx.out(0);
    const int64_t size = y.numel();
    const double n = static_cast<double>(a_.periodic ? size : size - 1);
    const double pi = std::numbers::pi;
    StoreAll(a_.dtype, size, y.raw(), [&](int64_t i) {
      if (n == 0) return 1.0;
      const double t = static_cast<double>(i) / n;
      switch (kKind) {
        case WindowKind::kHann: {
          const double s = std::sin(pi * t);
          return s * s;
        }
        case WindowKind::kHamming:
          return 25.0 / 46.0 - 21.0 / 46.0 * std::cos(2 * pi * t);
        case WindowKind::kBlackman:
          return 0.42 - 0.5 * std::cos(2 * pi * t) + 0.08 * std::cos(4 * pi * t);
      }
      return 0.0;
    });
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit WindowOp(const ir::Node& node) : Op(node) {}
  GeneratorAttrs a_;
};
KILN_REGISTER_OP("HannWindow", 17, ir::kMaxOpset, &WindowOp<WindowKind::kHann>::Create);
KILN_REGISTER_OP("HammingWindow", 17, ir::kMaxOpset, &WindowOp<WindowKind::kHamming>::Create);
KILN_REGISTER_OP("BlackmanWindow", 17, ir::kMaxOpset, &WindowOp<WindowKind::kBlackman>::Create);

class MelWeightMatrixOp final : public ir::Op {
 public:
  static StatusOr<std::unique_ptr<ir::Op>> Create(const ir::Node& node) {
    std::unique_ptr<MelWeightMatrixOp> op(new MelWeightMatrixOp(node));
    KILN_RETURN_IF_ERROR(ParseOutputDtype(node, &op->a_));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  std::vector<int> ShapeInputs() const override { return {0, 1}; }

  Status Infer(ir::InferContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> mels, KnownInts(ctx, 0, "num_mel_bins"));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dft, KnownInts(ctx, 1, "dft_length"));
    if (mels.size() != 1 || mels[0] < 1)
      return ctx.Error("num_mel_bins must be a scalar >= 1; got " + IntsToString(mels));
    if (dft.size() != 1 || dft[0] < 1)
      return ctx.Error("dft_length must be a scalar >= 1; got " + IntsToString(dft));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(2, {DataType::kInt32, DataType::kInt64}));
    for (size_t i : {3, 4}) KILN_RETURN_IF_ERROR(ctx.ExpectDtype(i, {DataType::kFloat}));
    for (size_t i : {2, 3, 4})
      if (NumElements(ctx.shape(i)) != 1)
        return ctx.Error("input " + std::to_string(i) + " must be a scalar; got shape " +
                         ShapeToString(ctx.shape(i)));
    ctx.SetOutput(0, a_.dtype, {dft[0] / 2 + 1, mels[0]});
    return OkStatus();
  }

  Status Compute(const ir::ComputeContext& ctx) const override {
    const int64_t mels = ReadInts(ctx.in(0))[0], dft = ReadInts(ctx.in(1))[0];
    const int64_t rate = ReadInts(ctx.in(2))[0];
    if (rate <= 0) return RunError("sample_rate must be > 0; got " + std::to_string(rate));
    const float lower = ctx.in(3).data<float>()[0], upper = ctx.in(4).data<float>()[0];
    auto mel = [](float f) { return 2595.f * std::log10(1.f + f / 700.f); };
    const float low_mel = mel(lower);
    const float step = (mel(upper) - low_mel) / static_cast<float>(mels + 2);
    std::vector<int64_t> point(mels + 2);
    for (int64_t i = 0; i < mels + 2; ++i) {
      const double m = static_cast<double>(i) * step + low_mel;
      const double hz = 700.0 * (std::pow(10.0, m / 2595.0) - 1.0);
      point[i] = TruncToInt64(std::floor(static_cast<double>(dft + 1) * hz / rate));
    }
    const int64_t rows = dft / 2 + 1;
    std::vector<double> w(rows * mels, 0.0);
    auto set = [&](int64_t row, int64_t col, double v) {
      if (row >= 0 && row < rows) w[row * mels + col] = v;
    };
    // Rows outside [0, rows) are skipped (edges past the Nyquist bin, or NaN edges read as 0).
    auto first = [&](int64_t j) { return std::max<int64_t>(j, 0); };
    auto last = [&](int64_t j) { return std::min<int64_t>(j, rows - 1); };
    for (int64_t i = 0; i < mels; ++i) {
      const int64_t lo = point[i], mid = point[i + 1], hi = point[i + 2];
      if (mid == lo)
        set(mid, i, 1.0);
      else
        for (int64_t j = first(lo); j <= last(mid); ++j)
          set(j, i, (double(j) - double(lo)) / (double(mid) - double(lo)));
      for (int64_t j = first(mid); j < hi && j <= last(hi); ++j)
        set(j, i, (double(hi) - double(j)) / (double(hi) - double(mid)));
    }
    StoreAll(a_.dtype, rows * mels, ctx.out(0).raw(), [&](int64_t i) { return w[i]; });
    return OkStatus();
  }

  const ir::OpAttrs* attributes() const override { return &a_; }

 private:
  explicit MelWeightMatrixOp(const ir::Node& node) : Op(node) {}
  GeneratorAttrs a_;
};
KILN_REGISTER_OP("MelWeightMatrix", 17, ir::kMaxOpset, &MelWeightMatrixOp::Create);

// Cases: periodic and symmetric windows of odd, even and size-1 lengths, an int32 size, a
// float64 and an int64 output; Mel matrices of a few sizes.
Tensor Int32Scalar(int32_t v) { return Tensor::FromVector<int32_t>({v}, {}); }

std::vector<OpCase> WindowCases() {
  std::vector<OpCase> cases;
  for (int periodic : {1, 0})
    for (int64_t size : {1, 8, 11})
      cases.push_back(
          OpCase("size " + std::to_string(size) + " periodic " + std::to_string(periodic), 17)
              .Const(CaseInt64s({size}).Reshaped({}))
              .Int("periodic", periodic));
  cases.push_back(OpCase("int32 size 6, float64 output", 17)
                      .Const(Int32Scalar(6))
                      .Int("output_datatype", static_cast<int64_t>(DataType::kDouble)));
  return cases;
}
KILN_REGISTER_OP_CASES("", "HannWindow", &WindowCases);
KILN_REGISTER_OP_CASES("", "HammingWindow", &WindowCases);
KILN_REGISTER_OP_CASES("", "BlackmanWindow", &WindowCases);

std::vector<OpCase> MelWeightMatrixCases() {
  std::vector<OpCase> cases;
  struct Mel {
    int32_t mels, dft, rate;
    float lo, hi;
  };
  for (const Mel& m : {Mel{8, 16, 8192, 0.f, 4096.f}, Mel{5, 33, 16000, 100.f, 7000.f},
                       Mel{1, 4, 100, 10.f, 40.f}})
    cases.push_back(OpCase("mels " + std::to_string(m.mels) + " dft " + std::to_string(m.dft), 17)
                        .Const(Int32Scalar(m.mels))
                        .Const(Int32Scalar(m.dft))
                        .Const(Int32Scalar(m.rate))
                        .Const(CaseFloats({m.lo}, {}))
                        .Const(CaseFloats({m.hi}, {})));
  return cases;
}
KILN_REGISTER_OP_CASES("", "MelWeightMatrix", &MelWeightMatrixCases);

}  // namespace
}  // namespace kiln::ops
