// cpu.qmatmul.onednn: kiln.QMatMul (src/ops/quant/qmatmul.cc) as a oneDNN int8 matmul: uint8/int8
// A [..., M, K] (plain; leading dims folded into M) with its zero point as a run-time source
// zero point, int8 B [K, N] packed once, output scales a_scale * b_scale[n] per column, float32
// bias (divided by those scales: oneDNN 2.6 adds the bias before scaling), the activation as an
// eltwise post-op, and a float32 destination, or uint8/int8 when the QMatMul absorbed a
// QuantizeLinear (a linear post-op divides by y_scale after the activation; y's zero point is
// oneDNN's destination zero point; oneDNN rounds to nearest even and saturates).
//
// Without VNNI, oneDNN's int8 matmul (its AVX2 integer gemm) sums pairs of uint8 x int8
// products in 16 bits (vpmaddubsw), which saturate for full-range values with both source types
// (measured: wrong sums with weights up to +-127, exact with +-63): B is halved (rounded to even,
// 7 bits, scales doubled), as cpu.qconv.onednn does for uint8 sources. An int8 A with a non-zero
// zero point is fed as uint8 (oneDNN's int8-with-zero-point path is a reference gemm).
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/onednn_common.h"
#include "ops/nn/gemm.h"
#include "ops/quant/quant_common.h"

namespace kiln::backends::cpu {
namespace {

using dnnl::memory;
using runtime::KernelSupport;
using runtime::TensorInfo;

class QMatMulOneDnn final : public runtime::Kernel {
 public:
  QMatMulOneDnn(const ir::Node& node, const ir::Op& op)
      : node_(node), a_(runtime::AttrsOf<ops::GemmAttrs>(op)) {}

  Status Prepare(runtime::PrepareContext* ctx) override {
    return Guard(node_, [&] { DoPrepare(ctx); });
  }

  // Scratch: A as uint8 (an int8 A with a zero point, see DoPrepare), then oneDNN's scratchpad.
  size_t ScratchBytes() const override { return ABytes() + pd_.scratchpad_desc().get_size(); }

  Status Run(const ir::ComputeContext& ctx) const override {
    return Guard(node_, [&] {
      char* scratch = static_cast<char*>(ctx.scratch);
      const void* a_data = ctx.in(0).raw();
      if (a_to_u8_) a_data = Int8AsUint8(a_data, ctx.in(0).bytes(), scratch);
      RunMemory a(a_desc_, a_data), y(descs_.dst, ctx.out(0).raw()),
          sp(descs_.scratchpad, scratch + ABytes());
      Execute(prim_, {{DNNL_ARG_SRC, a.get()},
                      {DNNL_ARG_WEIGHTS, weights_.get()},
                      {DNNL_ARG_BIAS, bias_.get(true)},
                      {DNNL_ARG_DST, y.get()},
                      {DNNL_ARG_SCRATCHPAD, sp.get()},
                      {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, a_zero_.get(true)},
                      {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, y_zero_.get(true)}});
      ThreadStream().wait();
    });
  }

 private:
  size_t ABytes() const { return a_to_u8_ ? (a_desc_.get_size() + 63) / 64 * 64 : 0; }

  void DoPrepare(runtime::PrepareContext* ctx) {
    const TensorInfo& ai = ctx->inputs[0];
    const Shape& bs = ctx->inputs[3].shape;
    const int64_t k = bs[0], n = bs[1];
    const int64_t m = NumElements(ai.shape) / std::max<int64_t>(k, 1);
    auto zero_point = [](const Tensor* t) {
      return t == nullptr ? 0 : ops::quant::ReadQuant(*t, 0);
    };
    a_zero_value_ = zero_point(node_.HasInput(2) ? ctx->constants[2] : nullptr);
    // oneDNN 2.6 runs an int8 source with a non-zero zero point on a reference gemm (measured
    // 20x slower than uint8 with one): such A is fed as uint8, v + 128, zero point + 128 (exact).
    a_to_u8_ = ai.dtype == DataType::kInt8 && a_zero_value_ != 0;
    if (a_to_u8_) a_zero_value_ += 128;
    const memory::data_type adt =
        ai.dtype == DataType::kUInt8 || a_to_u8_ ? memory::data_type::u8 : memory::data_type::s8;
    a_desc_ = memory::desc({m, k}, adt, memory::format_tag::ab);

    const bool halve = !Int8Vnni();
    const float sa = ctx->constants[1]->data<float>()[0];
    const float* sb = ctx->constants[4]->data<float>();
    std::vector<float> scales(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) scales[j] = sa * sb[j] * (halve ? 2.f : 1.f);
    // A column whose output scale is 0 (a zero b_scale[n]) is its bias alone: oneDNN 2.6 scales
    // (accumulator + bias), so its weights are zeroed (the accumulator is 0, the source zero
    // point's compensation too) and its scale set to 1 (the bias goes in as it is).
    const bool has_bias = node_.HasInput(5);
    std::vector<int64_t> zeroed;
    if (has_bias)
      for (int64_t j = 0; j < n; ++j)
        if (scales[j] == 0.f) {
          scales[j] = 1.f;
          zeroed.push_back(j);
        }

    dnnl::primitive_attr attr;
    attr.set_output_scales(1 << 1, scales);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const memory::desc s32_one({1}, memory::data_type::s32, memory::format_tag::x);
    if (a_zero_value_ != 0) {
      attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
      a_zero_ = memory(s32_one, Engine(), &a_zero_value_);
    }
    dnnl::post_ops ops;
    const bool quantized = node_.HasInput(6);
    if (quantized)
      AppendScaledActivation(a_.act, 1.f / ctx->constants[6]->data<float>()[0], &ops);
    else
      AppendActivation(a_.act, &ops);
    memory::data_type ydt = memory::data_type::f32;
    if (quantized) {
      ydt =
          ctx->outputs[0].dtype == DataType::kUInt8 ? memory::data_type::u8 : memory::data_type::s8;
      y_zero_value_ = zero_point(ctx->constants[7]);
      if (y_zero_value_ != 0) {
        attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
        y_zero_ = memory(s32_one, Engine(), &y_zero_value_);
      }
    }
    attr.set_post_ops(ops);

    memory::desc b_any({k, n}, memory::data_type::s8, memory::format_tag::any);
    memory::desc y_desc({m, n}, ydt, memory::format_tag::ab);
    memory::desc bias_desc({1, n}, memory::data_type::f32, memory::format_tag::ab);
    auto d = has_bias ? dnnl::matmul::desc(a_desc_, b_any, bias_desc, y_desc)
                      : dnnl::matmul::desc(a_desc_, b_any, y_desc);
    pd_ = dnnl::matmul::primitive_desc(d, attr, Engine());
    prim_ = dnnl::matmul(pd_);
    descs_ = PdDescs(pd_);

    const Tensor& b = *ctx->constants[3];
    Tensor changed = halve ? HalvedInt8(b) : Tensor();
    std::string variant = halve ? "halved" : "";
    if (!zeroed.empty()) {
      if (!halve) changed = b.Clone();
      variant += "zeroed";
      int8_t* bp = changed.data<int8_t>();
      for (int64_t j : zeroed) {
        for (int64_t i = 0; i < k; ++i) bp[i * n + j] = 0;
        variant += "," + std::to_string(j);
      }
    }
    const memory::desc b_plain({k, n}, memory::data_type::s8, memory::format_tag::ab);
    weights_ = PackWeights(b_plain, b, pd_.weights_desc(), &packed_b_, ctx->weights,
                           variant.empty() ? nullptr : &changed, variant);
    if (has_bias) {
      // oneDNN 2.6 scales (accumulator + bias): the bias goes in divided by the output scale.
      bias_copy_ = Tensor::Empty(DataType::kFloat, {1, n});
      const float* src = ctx->constants[5]->data<float>();
      for (int64_t j = 0; j < n; ++j) bias_copy_.data<float>()[j] = src[j] / scales[j];
      bias_ = memory(bias_desc, Engine(), bias_copy_.raw());
    }
  }

  ir::Node node_;
  ops::GemmAttrs a_;
  memory::desc a_desc_;
  dnnl::matmul::primitive_desc pd_;
  PdDescs descs_;
  dnnl::matmul prim_;
  Tensor packed_b_, bias_copy_;
  memory weights_, bias_, a_zero_, y_zero_;
  int32_t a_zero_value_ = 0, y_zero_value_ = 0;
  bool a_to_u8_ = false;
};

KernelSupport SupportsQMatMul(const ir::Node& node, const ir::Op& op,
                              const std::vector<TensorInfo>& in) {
  if (in[0].dtype != DataType::kUInt8 && in[0].dtype != DataType::kInt8)
    return {false, "needs uint8 or int8 A"};
  if (in[0].shape.size() < 2 || NumElements(in[0].shape) == 0)
    return {false, "needs a non-empty A"};
  if (node.HasInput(5) && in[5].dtype != DataType::kFloat) return {false, "needs float32 bias"};
  dnnl::post_ops probe;
  if (!AppendActivation(runtime::AttrsOf<ops::GemmAttrs>(op).act, &probe))
    return {false, "activation has no oneDNN post-op"};
  return {true, ""};
}

// a_scale, a_zero_point, Bq, b_scale, bias, y_scale and y_zero_point must be constant.
KILN_REGISTER_KERNEL(runtime::KernelDef{"cpu.qmatmul.onednn",
                                        "QMatMul",
                                        "kiln",
                                        1,
                                        1,
                                        Backend::kCpu,
                                        10,
                                        SupportsQMatMul,
                                        CreateKernel<QMatMulOneDnn>,
                                        {1, 2, 3, 4, 5, 6, 7}});

}  // namespace
}  // namespace kiln::backends::cpu
