// Google Benchmark: a 1x1 convolution (stride 1, no padding, NHWC activations, the layout kiln's
// CPU backend keeps between oneDNN ops) run as oneDNN's convolution_forward against the same
// product run as oneDNN's matmul ([N*H*W, Cin] x [Cin, Cout]), float32, weights prepacked in the
// layout each primitive chooses, for the 1x1 shapes of ResNet-50 and EfficientNet-B0 at batch 1
// and 32. It answers whether kiln should lower some 1x1 convolutions to matmuls.
// Run: OMP_NUM_THREADS=2 build/release/bench/kernels/kiln_conv1x1_bench
#include <benchmark/benchmark.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

dnnl::engine& Eng() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

void Fill(memory& m) {
  float* p = static_cast<float*>(m.get_data_handle());
  const size_t n = m.get_desc().get_size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>((i * 7919) % 1000) / 1000.f - 0.5f;
}

// Runs `prim` (made from `pd`) on filled buffers, once per benchmark iteration.
template <typename PrimitiveDesc>
void Time(benchmark::State& state, const PrimitiveDesc& pd, const dnnl::primitive& prim,
          const memory::desc& src, const memory::desc& dst, const memory::desc& b) {
  dnnl::stream s(Eng());
  memory ms(src, Eng()), md(dst, Eng()), mw(pd.weights_desc(), Eng()), mb(b, Eng());
  Fill(ms);
  Fill(mw);
  Fill(mb);
  for (auto _ : state) {
    prim.execute(
        s, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, md}});
    s.wait();
  }
  state.SetLabel(pd.impl_info_str());
}

void Conv1x1(benchmark::State& state) {
  const memory::dim n = state.range(0), ic = state.range(1), oc = state.range(2),
                    hw = state.range(3);
  memory::desc src({n, ic, hw, hw}, dt::f32, tag::acdb);
  memory::desc dst({n, oc, hw, hw}, dt::f32, tag::acdb);
  memory::desc w_any({oc, ic, 1, 1}, dt::f32, tag::any);
  memory::desc b({oc}, dt::f32, tag::x);
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                    dnnl::algorithm::convolution_direct, src, w_any, b, dst, {1, 1},
                                    {0, 0}, {0, 0}, {0, 0});
  dnnl::convolution_forward::primitive_desc pd(d, Eng());
  Time(state, pd, dnnl::primitive(pd), src, dst, b);
}

void MatMul1x1(benchmark::State& state) {
  const memory::dim n = state.range(0), ic = state.range(1), oc = state.range(2),
                    hw = state.range(3);
  const memory::dim rows = n * hw * hw;
  memory::desc src({rows, ic}, dt::f32, tag::ab);
  memory::desc dst({rows, oc}, dt::f32, tag::ab);
  memory::desc w_any({ic, oc}, dt::f32, tag::any);
  memory::desc b({1, oc}, dt::f32, tag::ab);
  dnnl::matmul::desc d(src, w_any, b, dst);
  dnnl::matmul::primitive_desc pd(d, Eng());
  Time(state, pd, dnnl::primitive(pd), src, dst, b);
}

// {batch, Cin, Cout, H (= W)}: ResNet-50's and EfficientNet-B0's stride-1 1x1 convolutions.
void Shapes(benchmark::internal::Benchmark* b) {
  const std::vector<std::vector<int64_t>> shapes = {
      {64, 256, 56},   {256, 64, 56},   {256, 128, 56}, {128, 512, 28}, {512, 128, 28},
      {256, 1024, 14}, {1024, 256, 14}, {512, 2048, 7}, {2048, 512, 7}, {16, 96, 112},
      {144, 24, 56},   {240, 40, 28},   {480, 80, 14},  {112, 672, 14}, {672, 112, 14},
      {1152, 192, 7},  {192, 1152, 7},  {320, 1280, 7}};
  for (int64_t batch : {1, 32})
    for (const auto& s : shapes) b->Args({batch, s[0], s[1], s[2]});
  b->ArgNames({"n", "ic", "oc", "hw"})->Unit(benchmark::kMicrosecond)->MinTime(0.05);
}

BENCHMARK(Conv1x1)->Apply(Shapes);
BENCHMARK(MatMul1x1)->Apply(Shapes);

}  // namespace

BENCHMARK_MAIN();
