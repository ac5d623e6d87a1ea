// NonMaxSuppression (10-24): per batch and class, boxes whose score passes score_threshold
// (strictly greater; every box when the input is absent) are taken best score first (equal scores:
// the lower box index first) and kept unless their IoU with a box already kept for that class
// exceeds iou_threshold, until max_output_boxes_per_class are kept (absent or <= 0: none).
// center_point_box 0: boxes [y1, x1, y2, x2] as any two opposite corners; 1: [x_center, y_center,
// width, height]. A box of zero area suppresses nothing. Output selected_indices [n, 3] int64 of
// (batch, class, box), in that visiting order: its length depends on the data, so the op computes
// its output itself (ShapesFromRun, as control flow). The arithmetic is float32, as ONNX's
// reference and ONNX Runtime. O(boxes^2) per class at worst; single-threaded.
#include <algorithm>
#include <numeric>

#include "ops/common.h"

namespace kiln::ops {
namespace {

using ir::ComputeContext;
using ir::Node;

struct Box {
  float x_min, x_max, y_min, y_max;
};

Box ReadBox(const float* b, bool center) {
  if (center) {
    const float hw = b[2] / 2, hh = b[3] / 2;
    return {b[0] - hw, b[0] + hw, b[1] - hh, b[1] + hh};
  }
  return {std::min(b[1], b[3]), std::max(b[1], b[3]), std::min(b[0], b[2]), std::max(b[0], b[2])};
}

bool Suppresses(const Box& a, const Box& b, float iou_threshold) {
  const float ix_min = std::max(a.x_min, b.x_min), ix_max = std::min(a.x_max, b.x_max);
  if (ix_max <= ix_min) return false;
  const float iy_min = std::max(a.y_min, b.y_min), iy_max = std::min(a.y_max, b.y_max);
  if (iy_max <= iy_min) return false;
  const float inter = (ix_max - ix_min) * (iy_max - iy_min);
  if (inter <= 0) return false;
  const float area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const float area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  const float uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

class NmsOp final : public ir::Op {
 public:
  explicit NmsOp(const Node& node) : ir::Op(node), center_(node.GetInt("center_point_box", 0)) {}

  static StatusOr<std::unique_ptr<ir::Op>> Create(const Node& node) {
    const int64_t c = node.GetInt("center_point_box", 0);
    if (c != 0 && c != 1)
      return ir::AttrError(node, "center_point_box must be 0 or 1; got " + std::to_string(c));
    return std::unique_ptr<ir::Op>(new NmsOp(node));
  }

  bool ShapesFromRun() const override { return true; }
  Status Infer(ir::InferContext& ctx) const override {
    return ctx.Error("its output length depends on the scores, known only by running it");
  }

  Status Compute(const ComputeContext& ctx) const override {
    if (!ctx.has(0) || !ctx.has(1)) return RunError("boxes and scores are required");
    const Tensor& boxes = ctx.in(0);
    const Tensor& scores = ctx.in(1);
    if (boxes.dtype() != DataType::kFloat || scores.dtype() != DataType::kFloat)
      return RunError("boxes and scores must be float32; got " +
                      std::string(DataTypeName(boxes.dtype())) + " and " +
                      DataTypeName(scores.dtype()));
    if (boxes.rank() != 3 || boxes.shape()[2] != 4 || scores.rank() != 3 ||
        scores.shape()[0] != boxes.shape()[0] || scores.shape()[2] != boxes.shape()[1])
      return RunError(
          "boxes must be [batches, boxes, 4] and scores [batches, classes, boxes]; got " +
          ShapeToString(boxes.shape()) + " and " + ShapeToString(scores.shape()));
    int64_t max_out = 0;
    float iou = 0.f;
    bool has_score = false;
    float score_threshold = 0.f;
    auto scalar = [&](size_t i, DataType want, const char* name) -> Status {
      if (ctx.in(i).numel() != 1 || ctx.in(i).dtype() != want)
        return RunError(std::string(name) + " must be one " + DataTypeName(want) +
                        " element; got " + DataTypeName(ctx.in(i).dtype()) +
                        ShapeToString(ctx.in(i).shape()));
      return OkStatus();
    };
    if (ctx.has(2) && ctx.in(2).numel() != 0) {
      KILN_RETURN_IF_ERROR(scalar(2, DataType::kInt64, "max_output_boxes_per_class"));
      max_out = std::max<int64_t>(ctx.in(2).data<int64_t>()[0], 0);
    }
    if (ctx.has(3) && ctx.in(3).numel() != 0) {
      KILN_RETURN_IF_ERROR(scalar(3, DataType::kFloat, "iou_threshold"));
      iou = ctx.in(3).data<float>()[0];
    }
    if (ctx.has(4) && ctx.in(4).numel() != 0) {
      KILN_RETURN_IF_ERROR(scalar(4, DataType::kFloat, "score_threshold"));
      has_score = true;
      score_threshold = ctx.in(4).data<float>()[0];
    }
    const int64_t batches = boxes.shape()[0], n = boxes.shape()[1], classes = scores.shape()[1];
    std::vector<int64_t> out;
    std::vector<int64_t> order;
    std::vector<Box> kept;
    for (int64_t b = 0; b < batches; ++b) {
      const float* bb = boxes.data<float>() + b * n * 4;
      for (int64_t c = 0; c < classes && max_out > 0; ++c) {
        const float* sc = scores.data<float>() + (b * classes + c) * n;
        order.clear();
        for (int64_t i = 0; i < n; ++i)
          if (!has_score || sc[i] > score_threshold) order.push_back(i);
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t x, int64_t y) { return sc[x] > sc[y]; });
        kept.clear();
        for (int64_t i : order) {
          if (static_cast<int64_t>(kept.size()) >= max_out) break;
          const Box box = ReadBox(bb + i * 4, center_ == 1);
          bool keep = true;
          for (const Box& k : kept)
            if (Suppresses(box, k, iou)) {
              keep = false;
              break;
            }
          if (!keep) continue;
          kept.push_back(box);
          out.insert(out.end(), {b, c, i});
        }
      }
    }
    Tensor t = Tensor::Empty(DataType::kInt64, {static_cast<int64_t>(out.size() / 3), 3});
    std::copy(out.begin(), out.end(), t.data<int64_t>());
    *ctx.outputs[0] = std::move(t);
    return OkStatus();
  }

 private:
  int64_t center_;
};

KILN_REGISTER_OP("NonMaxSuppression", 10, ir::kMaxOpset, &NmsOp::Create);

}  // namespace
}  // namespace kiln::ops
