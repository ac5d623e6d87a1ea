// Col2Im (18-24): the inverse of im2col, summing overlapping blocks (PyTorch's fold).
//
// input [N, C * prod(block_shape), L], image_shape (int64 [r]: the spatial dims of the output),
// block_shape (int64 [r]); both are shape inputs. Attributes dilations, pads (begin..., end...)
// and strides, each r values (defaults 1, 0, 1). The blocks per dim are
// (image + pad_begin + pad_end - (dilation * (block - 1) + 1)) / stride + 1, at least 1 each, and
// their product must equal L. Output [N, C, image_shape...]: column (c * prod(block) + k, l), k a
// position inside the block and l a block, is added at image position
// block_index(l) * stride - pad_begin + k_index * dilation when that lies inside the image.
// Reference algorithm: plain loops, double accumulation; float32 only.
#include "ops/nn/col2im.h"

#include <algorithm>

#include "ops/common.h"
#include "ops/nn/spatial.h"
#include "ops/op_cases.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::InferContext;
using ir::Node;

class Col2ImOp final : public ir::Op {
 public:
  explicit Col2ImOp(const Node& node) : ir::Op(node) {}

  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    auto op = std::unique_ptr<Col2ImOp>(new Col2ImOp(node));
    Col2ImAttrs& a = op->a_;
    a.dilations = node.GetInts("dilations");
    a.pads = node.GetInts("pads");
    a.strides = node.GetInts("strides");
    for (int64_t d : a.dilations)
      if (d < 1)
        return ir::AttrError(node, "dilations must be >= 1; got " + nn::JoinInts(a.dilations));
    for (int64_t s : a.strides)
      if (s < 1) return ir::AttrError(node, "strides must be >= 1; got " + nn::JoinInts(a.strides));
    for (int64_t p : a.pads)
      if (p < 0) return ir::AttrError(node, "pads must be >= 0; got " + nn::JoinInts(a.pads));
    return std::unique_ptr<ir::Op>(std::move(op));
  }

  std::vector<int> ShapeInputs() const override { return {1, 2}; }
  const ir::OpAttrs* attributes() const override { return &a_; }

  Status Infer(InferContext& ctx) const override {
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(0, {DataType::kFloat}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64}));
    KILN_RETURN_IF_ERROR(ctx.ExpectDtype(2, {DataType::kInt64}));
    if (!ctx.value(1) || !ctx.value(2))
      return ctx.Error("image_shape and block_shape must be known to infer the output shape");
    Col2ImGeometry geo;
    std::string why;
    if (!ResolveCol2Im(a_, ctx.shape(0), ReadInts(*ctx.value(1)), ReadInts(*ctx.value(2)), &geo,
                       &why))
      return ctx.Error(why);
    Shape out{ctx.shape(0)[0], ctx.shape(0)[1] / geo.block_size};
    out.insert(out.end(), geo.image.begin(), geo.image.end());
    ctx.SetOutput(0, DataType::kFloat, std::move(out));
    return OkStatus();
  }

  Status Compute(const ComputeContext& ctx) const override {
    const Tensor& x = ctx.in(0);
    Col2ImGeometry geo;
    std::string why;
    if (!ResolveCol2Im(a_, x.shape(), ReadInts(ctx.in(1)), ReadInts(ctx.in(2)), &geo, &why))
      return RunError(why);
    const int64_t r = static_cast<int64_t>(geo.image.size());
    const int64_t planes = x.shape()[0] * (x.shape()[1] / geo.block_size);
    const float* src = x.data<float>();
    float* y = ctx.out(0).data<float>();
    std::vector<double> acc(static_cast<size_t>(geo.image_size));
    std::vector<int64_t> k_idx(r), l_idx(r);
    for (int64_t p = 0; p < planes; ++p) {
      std::fill(acc.begin(), acc.end(), 0.0);
      const float* col = src + p * geo.block_size * geo.num_blocks;
      std::fill(k_idx.begin(), k_idx.end(), 0);
      for (int64_t k = 0; k < geo.block_size; ++k) {
        std::fill(l_idx.begin(), l_idx.end(), 0);
        for (int64_t l = 0; l < geo.num_blocks; ++l) {
          int64_t pos = 0;
          bool inside = true;
          for (int64_t d = 0; d < r && inside; ++d) {
            const int64_t i = l_idx[d] * geo.strides[d] - geo.pads[d] + k_idx[d] * geo.dilations[d];
            inside = i >= 0 && i < geo.image[d];
            pos = pos * geo.image[d] + i;
          }
          if (inside) acc[pos] += col[k * geo.num_blocks + l];
          for (int64_t d = r - 1; d >= 0; --d) {
            if (++l_idx[d] < geo.blocks[d]) break;
            l_idx[d] = 0;
          }
        }
        for (int64_t d = r - 1; d >= 0; --d) {
          if (++k_idx[d] < geo.block[d]) break;
          k_idx[d] = 0;
        }
      }
      for (int64_t i = 0; i < geo.image_size; ++i)
        y[p * geo.image_size + i] = static_cast<float>(acc[i]);
    }
    return OkStatus();
  }

 private:
  Col2ImAttrs a_;
};

}  // namespace

bool ResolveCol2Im(const Col2ImAttrs& a, const Shape& in, std::vector<int64_t> image,
                   std::vector<int64_t> block, Col2ImGeometry* g, std::string* why) {
  const size_t r = image.size();
  if (in.size() != 3) {
    *why = "input must be [N, C * prod(block_shape), L]; got " + ShapeToString(in);
    return false;
  }
  if (r == 0 || block.size() != r) {
    *why = "image_shape and block_shape must have the same non-zero length; got " +
           nn::JoinInts(image) + " and " + nn::JoinInts(block);
    return false;
  }
  auto fits = [&](const std::vector<int64_t>& v, size_t n, const char* name) {
    if (v.empty() || v.size() == n) return true;
    *why =
        std::string(name) + " must have " + std::to_string(n) + " values; got " + nn::JoinInts(v);
    return false;
  };
  if (!fits(a.dilations, r, "dilations") || !fits(a.strides, r, "strides") ||
      !fits(a.pads, 2 * r, "pads"))
    return false;
  g->image = std::move(image);
  g->block = std::move(block);
  g->dilations = a.dilations.empty() ? std::vector<int64_t>(r, 1) : a.dilations;
  g->strides = a.strides.empty() ? std::vector<int64_t>(r, 1) : a.strides;
  std::vector<int64_t> pads = a.pads.empty() ? std::vector<int64_t>(2 * r, 0) : a.pads;
  g->pads.assign(pads.begin(), pads.begin() + static_cast<int64_t>(r));
  g->blocks.assign(r, 0);
  for (size_t d = 0; d < r; ++d) {
    if (g->image[d] < 1 || g->block[d] < 1) {
      *why = "image_shape and block_shape must be >= 1; got " + nn::JoinInts(g->image) + " and " +
             nn::JoinInts(g->block);
      return false;
    }
    const int64_t span =
        g->image[d] + pads[d] + pads[r + d] - (g->dilations[d] * (g->block[d] - 1) + 1);
    if (span < 0) {
      *why = "the dilated block must fit in the padded image along dim " + std::to_string(d) +
             "; got image " + std::to_string(g->image[d]) + ", block " +
             std::to_string(g->block[d]);
      return false;
    }
    g->blocks[d] = span / g->strides[d] + 1;
    g->block_size *= g->block[d];
    g->num_blocks *= g->blocks[d];
    g->image_size *= g->image[d];
  }
  if (in[1] % g->block_size != 0) {
    *why = "input dim 1 (" + std::to_string(in[1]) + ") must be a multiple of prod(block_shape) " +
           std::to_string(g->block_size);
    return false;
  }
  if (in[2] != g->num_blocks) {
    *why = "input dim 2 must equal the number of blocks " + nn::JoinInts(g->blocks) + " = " +
           std::to_string(g->num_blocks) + "; got " + std::to_string(in[2]);
    return false;
  }
  return true;
}

namespace {

KILN_REGISTER_OP("Col2Im", 18, ir::kMaxOpset, &Col2ImOp::Create);

// Kernel cases (ops/op_cases.h), after the former hand-written kernel tests (Col2ImLoops) and
// the former selftest cases: 1-D to 4-D, strides (the strided inner loop), dilations, asymmetric
// pads that clip blocks at both ends, several images and channels, a block dim of 1. image_shape
// and block_shape are constants (cpu.col2im.loops reads them at Prepare).
struct Col2ImShape {
  std::vector<int64_t> image, block, strides, dilations, pads;
  int64_t n, c;
};

std::vector<OpCase> Col2ImCases() {
  const Col2ImShape shapes[] = {
      {{9, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 2, 3},
      {{10, 11}, {2, 3}, {2, 3}, {1, 2}, {0, 2, 1, 0}, 1, 2},
      {{7, 12}, {3, 2}, {1, 2}, {2, 1}, {2, 0, 0, 3}, 2, 1},
      {{9, 10}, {2, 3}, {2, 1}, {1, 2}, {1, 0, 0, 2}, 2, 3},
      {{17}, {4}, {3}, {2}, {1, 2}, 2, 2},
      {{5, 4, 6}, {2, 2, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 0, 1, 0, 1}, 1, 2},
      {{6, 5, 7}, {3, 2, 2}, {2, 1, 3}, {1, 2, 1}, {1, 0, 2, 0, 1, 1}, 2, 1},
      {{3, 4, 3, 5}, {2, 2, 1, 3}, {1, 2, 1, 1}, {1, 1, 2, 1}, {0, 1, 0, 1, 1, 0, 1, 0}, 1, 2},
  };
  std::vector<OpCase> cases;
  uint32_t seed = 800;
  for (const Col2ImShape& s : shapes) {
    const size_t r = s.image.size();
    int64_t block_size = 1, blocks = 1;
    for (size_t d = 0; d < r; ++d) {
      block_size *= s.block[d];
      blocks *= (s.image[d] + s.pads[d] + s.pads[r + d] - (s.dilations[d] * (s.block[d] - 1) + 1)) /
                    s.strides[d] +
                1;
    }
    const Shape xs{s.n, s.c * block_size, blocks};
    cases.push_back(OpCase("image " + ShapeToString(s.image) + " block " + ShapeToString(s.block) +
                               " strides " + ShapeToString(s.strides) + " dilations " +
                               ShapeToString(s.dilations) + " pads " + ShapeToString(s.pads),
                           18)
                        .In(CaseTensor(xs, seed++))
                        .Const(CaseInt64s(s.image))
                        .Const(CaseInt64s(s.block))
                        .Ints("strides", s.strides)
                        .Ints("dilations", s.dilations)
                        .Ints("pads", s.pads));
  }
  return cases;
}
KILN_REGISTER_OP_CASES("", "Col2Im", &Col2ImCases);

}  // namespace
}  // namespace kiln::ops
