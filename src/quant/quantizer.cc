// kiln::Quantizer (include/kiln/quantize.h): node selection, the calibration session (the model
// with every quantized activation added as a graph output), streaming statistics
// (quant/calibration.h) and the QDQ rewrite (quant/qdq_graph.h), on kiln's IR: the model is read
// once, every session (calibration, bias correction, the auto search's candidates, Compare) runs
// on an in-memory graph, and only the written model is serialized (onnx/onnx_writer.h).
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "kiln/quantize.h"
#include "kiln/version.h"
#include "onnx/onnx_loader.h"
#include "onnx/onnx_writer.h"
#include "onnx/opset_convert.h"
#include "quant/calibration.h"
#include "quant/qdq_graph.h"
#include "runtime/plan_cache.h"
#include "runtime/session_access.h"

namespace kiln {

namespace {

// Why node `node` (of `op_type`) stays float by the user's keep-float list, or "".
std::string KeptBy(const std::string& node, const std::string& op_type,
                   const std::vector<std::string>& keep) {
  for (const auto& k : keep) {
    if (k == node || k == op_type || fnmatch(k.c_str(), node.c_str(), 0) == 0)
      return "--keep-float " + k;
  }
  return "";
}

// `batch` split along dim 0 into runs of at most `rows` samples, when every input has the same
// dim 0 (samples); otherwise (or rows <= 0, or a small batch) the batch itself.
std::vector<std::vector<NamedTensor>> Chunks(const std::vector<NamedTensor>& batch, int64_t rows) {
  int64_t n = -1;
  bool split = rows > 0 && !batch.empty();
  for (const auto& t : batch) {
    if (t.tensor.rank() == 0) {
      split = false;
      break;
    }
    if (n < 0) n = t.tensor.shape()[0];
    split = split && t.tensor.shape()[0] == n;
  }
  if (!split || n <= rows) return {batch};
  std::vector<std::vector<NamedTensor>> out;
  for (int64_t begin = 0; begin < n; begin += rows) {
    const int64_t end = std::min(n, begin + rows);
    std::vector<NamedTensor> chunk;
    for (const auto& t : batch) {
      Shape shape = t.tensor.shape();
      const size_t row = t.tensor.bytes() / static_cast<size_t>(n);
      shape[0] = end - begin;
      Tensor part = Tensor::Empty(t.tensor.dtype(), shape);
      std::memcpy(part.raw(), static_cast<const char*>(t.tensor.raw()) + begin * row,
                  (end - begin) * row);
      chunk.push_back({t.name, std::move(part)});
    }
    out.push_back(std::move(chunk));
  }
  return out;
}

}  // namespace

struct Quantizer::Impl {
  // The model (its Constant nodes hoisted; converted to opset 13 when it imported an older one).
  std::shared_ptr<const ir::Graph> graph;
  std::string model_hash;  // of the file as given (before any opset conversion)
  int64_t converted_from_opset = 0;
  // The model as given when it was converted (released once the first calibration batch has run
  // both forms), and the largest output difference that run found.
  std::shared_ptr<const ir::Graph> original;
  double conversion_max_diff = -1;
  std::string per_tensor_reason;
  QuantizeOptions options;
  quant::Method method = quant::Method::kPercentile;
  int64_t opset = 0;
  std::vector<quant::QdqCandidate> selected;
  std::vector<quant::QdqConcat> concats;
  std::vector<quant::QdqAdd> adds;  // residual Adds whose inputs are calibrated
  std::vector<std::pair<std::string, std::string>> float_nodes;
  std::vector<std::string> tensors;  // quantized activations, in graph order
  std::map<std::string, quant::TensorStats> stats;
  // Tensors with per-channel scales (options.channel_activations), their statistics per channel
  // (axis 1; sized at the first batch).
  std::set<std::string> channel_tensors;
  std::map<std::string, std::vector<quant::TensorStats>> channel_stats;
  std::unique_ptr<Session> session;
  int pass = -1;
  int64_t samples = 0;
  // The calibration cache: where it is, its keys, and the ranges read from it.
  std::string cache_path;
  nlohmann::json cache_keys;
  bool from_cache = false;
  struct Range {
    float min = 0, max = 0, threshold = 0;
    std::vector<float> channel_thresholds;  // per-channel tensors only
  };
  std::map<std::string, Range> ranges;  // filled by Write (or the cache)
  std::unique_ptr<ir::Graph> written;   // the QDQ model Write wrote
  // Bias correction (the last pass): the float model with an int8 copy of each quantized
  // convolution reading the same float input (quant::AddIsolatedCopies), so that each
  // convolution's own error is measured, not what the layers before it add (NNCF's fast bias
  // correction); per convolution output the per-channel sum of float minus int8, and the count
  // of values summed per channel.
  std::unique_ptr<Session> bias_session;
  std::map<std::string, std::string> bias_probe;  // convolution output -> its int8 copy's
  std::map<std::string, std::vector<double>> bias_sum;
  std::map<std::string, int64_t> bias_count;
  bool bias_done = false;
  // Method auto: per tensor the four methods' thresholds, the method the search kept, the batch
  // it runs on (the first of its pass), and what it did.
  std::map<std::string, std::vector<std::pair<quant::Method, float>>> candidates;
  std::map<std::string, std::string> chosen;
  std::vector<NamedTensor> auto_batch;
  bool auto_done = false;
  int auto_evaluations = 0;
  double auto_error_start = 0, auto_error = 0;

  int range_passes() const {
    if (from_cache) return 0;
    return method == quant::Method::kMinMax ? 1 : 2;
  }
  // The auto method's search pass (after the range passes), unless the cache had its result.
  int auto_passes() const { return method == quant::Method::kAuto && !from_cache ? 1 : 0; }
  int bias_pass() const { return range_passes() + auto_passes(); }
  Status ComputeRanges() {
    if (from_cache || !ranges.empty()) return OkStatus();
    for (const auto& t : tensors) {
      const quant::TensorStats& s = stats.at(t);
      if (!s.has_range()) return Internal("tensor '" + t + "' was never observed");
      const bool is_signed = s.min() < 0.f;
      const int levels = is_signed ? 128 : 256;
      Range r{s.min(), s.max(), quant::Threshold(s, method, options.percentile, levels), {}};
      if (method == quant::Method::kAuto)
        for (quant::Method m : {quant::Method::kPercentile, quant::Method::kMinMax,
                                quant::Method::kEntropy, quant::Method::kMse})
          candidates[t].emplace_back(m, quant::Threshold(s, m, options.percentile, levels));
      auto ch = channel_stats.find(t);
      if (ch != channel_stats.end()) {
        if (ch->second.empty()) return Internal("tensor '" + t + "' had no channels");
        for (const auto& c : ch->second)
          r.channel_thresholds.push_back(
              c.has_range() ? quant::Threshold(c, method, options.percentile, levels) : 0.f);
      }
      ranges[t] = std::move(r);
    }
    return OkStatus();
  }
  // Shared-scale groups (see PlanScaleGroups).
  struct Group {
    float threshold = 0, min = 0, max = 0;
    bool is_signed = false, ranged = false;
    // The widest threshold among the members quantized nodes or planned Adds read (a
    // Concat's output, the convolution's half of a Split), which wins over the others' (a
    // Concat input's own percentile, say, above the joined tensor's).
    float read_threshold = 0;
    bool read = false;
    // An AveragePool is a member: the widest threshold of all members wins
    // (its output, which the readers see, spans less than its input; were the input quantized
    // with the output's threshold, the values above it would be clipped before the average).
    bool averaging = false;
  };
  struct ScaleGroups {
    std::set<std::string> shared;         // QdqConcat::node
    std::map<std::string, int> group_of;  // tensor -> group
    std::vector<Group> groups;
  };
  // Shared scales: Concats and pass-through ops (quant::kPassThroughOps) whose outputs only
  // quantized nodes, planned Adds or other shared ops read, and (pass-through ops) whose data
  // input a quantized convolution (through its activation or not), a planned Add or another
  // shared op writes and only such readers read. Each shared op's data inputs and outputs form
  // one group (union over the ops) with one scale: the widest threshold of its calibrated
  // members that quantized nodes or planned Adds read (else of all its calibrated members;
  // signed if any member is), so every tensor of a group is quantized once and the ops
  // between run on 8-bit values. A group with no calibrated member is not shared.
  // `plan_adds`: QdqPlan::adds; `used`: the tensors quantized nodes and those Adds read.
  ScaleGroups PlanScaleGroups(const std::vector<std::string>& plan_adds,
                              const std::set<std::string>& used) const {
    ScaleGroups sg;
    std::map<std::string, const quant::QdqConcat*> by_node;
    auto& shared = sg.shared;
    auto& group_of = sg.group_of;
    auto& groups = sg.groups;
    std::map<std::string, std::string> activation_of;  // selected node -> its activation
    std::set<std::string> convs;
    for (const auto& c : selected) {
      activation_of[c.node] = c.activation;
      if (c.op_type == "Conv") convs.insert(c.node);
    }
    const std::set<std::string> planned_adds(plan_adds.begin(), plan_adds.end());
    std::map<std::string, std::string> add_result;
    for (const auto& a : adds) add_result[a.node] = a.result;
    for (const auto& c : concats) {
      by_node[c.node] = &c;
      bool ok = !c.constant_input && !c.graph_output && !c.readers.empty() &&
                KeptBy(c.node, c.op_type, options.keep_float).empty();
      if (c.op_type != "Concat") ok = ok && !c.input_graph_output;
      for (const auto* list : {&c.inputs, &c.outputs})
        for (const auto& t : *list) ok = ok && !channel_tensors.count(t);
      if (quant::IsAveragingOp(c.op_type)) {
        // Its output takes its input's scale: only when calibration saw the output span at least
        // half the input's threshold (a 3x3 average of dense ReLU outputs), so that it loses at
        // most a bit of resolution; not an average of sparse features, far below their maximum.
        auto in = ranges.find(c.inputs[0]), out = ranges.find(c.output);
        ok = ok && in != ranges.end() && out != ranges.end() &&
             out->second.threshold >= 0.5f * in->second.threshold;
      }
      if (ok) shared.insert(c.node);
    }
    auto reader_ok = [&](const std::string& node, int k) {
      if (planned_adds.count(node) || (k == 0 && activation_of.count(node))) return true;
      auto e = by_node.find(node);
      return shared.count(node) && k < static_cast<int>(e->second->inputs.size());
    };
    auto source_ok = [&](const std::string& src, const std::string& t) {
      if (convs.count(src) || shared.count(src)) return true;
      auto a = add_result.find(src);
      return planned_adds.count(src) && a != add_result.end() && a->second == t;
    };
    for (bool dropped = true; dropped;) {
      dropped = false;
      for (bool changed = true; changed;) {
        changed = false;
        for (auto it = shared.begin(); it != shared.end();) {
          const quant::QdqConcat& c = *by_node.at(*it);
          bool ok = true;
          for (const auto& [node, k] : c.readers) ok = ok && reader_ok(node, k);
          if (c.op_type != "Concat") {
            ok = ok && source_ok(c.sources[0], c.inputs[0]);
            for (const auto& [node, k] : c.input_readers) ok = ok && reader_ok(node, k);
          }
          if (ok) {
            ++it;
          } else {
            it = shared.erase(it);
            changed = true;
          }
        }
      }
      // Union-find over the shared ops' tensors.
      std::map<std::string, std::string> parent;
      std::function<std::string(const std::string&)> find = [&](const std::string& t) {
        auto p = parent.find(t);
        if (p == parent.end() || p->second == t) return parent[t] = t;
        return p->second = find(p->second);
      };
      // A Concat input that something else writes (a float op, a graph input) stays out of
      // the group: its writer cannot write 8-bit values, so it keeps its own scale for its
      // other readers and is quantized again with the group's for the Concat (sharing would
      // only cost resolution).
      for (const auto& node : shared) {
        const quant::QdqConcat& c = *by_node.at(node);
        const std::string root = find(c.output);
        for (const auto& t : c.outputs) parent[find(t)] = root;
        for (size_t k = 0; k < c.inputs.size(); ++k)
          if (c.op_type != "Concat" || source_ok(c.sources[k], c.inputs[k]))
            parent[find(c.inputs[k])] = root;
      }
      group_of.clear();
      groups.clear();
      std::map<std::string, int> index;
      for (const auto& [t, unused] : parent) {
        const std::string root = find(t);
        auto [g, added] = index.emplace(root, static_cast<int>(groups.size()));
        if (added) groups.emplace_back();
        group_of[t] = g->second;
        auto r = ranges.find(t);
        if (r == ranges.end()) continue;
        Group& gr = groups[g->second];
        gr.threshold =
            gr.ranged ? std::max(gr.threshold, r->second.threshold) : r->second.threshold;
        gr.min = gr.ranged ? std::min(gr.min, r->second.min) : r->second.min;
        gr.max = gr.ranged ? std::max(gr.max, r->second.max) : r->second.max;
        gr.ranged = true;
        gr.is_signed = gr.is_signed || r->second.min < 0.f;
        if (used.count(t)) {
          gr.read_threshold =
              gr.read ? std::max(gr.read_threshold, r->second.threshold) : r->second.threshold;
          gr.read = true;
        }
      }
      for (const auto& node : shared) {
        const quant::QdqConcat& c = *by_node.at(node);
        if (quant::IsAveragingOp(c.op_type)) groups[group_of.at(c.output)].averaging = true;
      }
      for (Group& gr : groups)
        if (gr.read && !gr.averaging) gr.threshold = gr.read_threshold;
      for (auto it = shared.begin(); it != shared.end();) {
        if (!groups[group_of.at(by_node.at(*it)->output)].ranged) {
          it = shared.erase(it);
          dropped = true;
        } else {
          ++it;
        }
      }
    }
    return sg;
  }
  // The QDQ plan from the ranges; `summary` (optional) gets the activations and nodes.
  quant::QdqPlan BuildPlan(QuantizeSummary* summary) const {
    quant::QdqPlan plan;
    plan.per_channel = opset >= 13;
    std::set<std::string> used;
    for (const auto& c : selected) used.insert(c.activation);
    if (options.quantize_adds) {
      // An Add one of whose inputs a quantized convolution writes, and whose result a quantized
      // node reads (so it is quantized anyway) or which reads the result of such an Add (the
      // last block's sum: were it float, the Add before it would have to keep a float result as
      // well, and could not run in int8): both inputs quantized (per tensor). In graph order.
      std::set<std::string> conv_outputs, planned_results;
      for (const auto& c : selected)
        if (c.op_type == "Conv" && !c.output.empty()) {
          conv_outputs.insert(c.output);
          if (!c.activated.empty()) conv_outputs.insert(c.activated);
        }
      std::vector<std::string> planned;
      for (const auto& a : adds) {
        const bool chained =
            planned_results.count(a.inputs[0]) || planned_results.count(a.inputs[1]);
        // Read only by Concats and pass-through ops, which share scales with what they feed
        // (YOLOv8's C2f: the bottleneck's sum goes to the block's Concat).
        bool to_shared = options.share_concat_scales && !a.result_readers.empty();
        for (const auto& r : a.result_readers)
          to_shared = to_shared && std::any_of(concats.begin(), concats.end(),
                                               [&](const auto& c) { return c.node == r; });
        if (a.graph_output || (!used.count(a.result) && !chained && !to_shared) ||
            channel_tensors.count(a.result) || !KeptBy(a.node, "Add", options.keep_float).empty() ||
            (!conv_outputs.count(a.inputs[0]) && !conv_outputs.count(a.inputs[1])))
          continue;
        bool per_tensor = true;
        for (const auto& in : a.inputs)
          per_tensor = per_tensor && ranges.count(in) && !channel_tensors.count(in);
        if (!per_tensor) continue;
        planned.push_back(a.node);
        planned_results.insert(a.result);
        for (const auto& in : a.inputs) used.insert(in);
      }
      plan.adds = planned;
      if (summary) summary->quantized_adds = static_cast<int>(planned.size());
    }
    ScaleGroups scale_groups;
    if (options.share_concat_scales) scale_groups = PlanScaleGroups(plan.adds, used);
    const auto& shared = scale_groups.shared;
    const auto& group_of = scale_groups.group_of;
    const auto& groups = scale_groups.groups;
    // `lo`: the lowest value to represent, 0 when calibration saw no negative value (the
    // group's, for a group member), else its minimum clipped at -threshold. uint8 with zero
    // point 0 when it is 0; int8 symmetric, or, with asymmetric_activations where the negative
    // side is under half the positive one (SiLU's -0.28 tail, HardSwish's -0.375), uint8 over
    // [lo, threshold] with a zero point (up to twice the resolution).
    auto emit = [&](const std::string& t, const Range& r, float lo) {
      quant::ActivationQuant a;
      a.tensor = t;
      const float hi = r.threshold;
      if (options.asymmetric_activations && lo < 0.f && r.channel_thresholds.empty() && hi > 0.f &&
          -lo < 0.5f * hi) {
        a.scale = (hi - lo) / 255.f;
        a.zero_point = static_cast<int32_t>(std::clamp(std::nearbyint(-lo / a.scale), 0.f, 255.f));
        a.is_signed = false;
        if (summary) ++summary->zero_point_activations;
      } else {
        a.is_signed = lo < 0.f;
        const float top = a.is_signed ? 127.f : 255.f;
        a.scale = hi > 0.f ? hi / top : 1.f;
        // A channel calibration saw all zero keeps the tensor's scale.
        for (float ct : r.channel_thresholds)
          a.channel_scales.push_back(ct > 0.f ? ct / top : a.scale);
        if (!a.channel_scales.empty())
          a.scale = *std::max_element(a.channel_scales.begin(), a.channel_scales.end());
      }
      plan.activations.push_back(a);
      if (summary) {
        auto m = chosen.find(t);
        summary->activations.push_back({t, a.is_signed ? "int8" : "uint8", a.scale, a.zero_point,
                                        r.min, r.max, r.threshold, a.channel_scales,
                                        m == chosen.end() ? "" : m->second});
      }
    };
    auto low = [](float min, float threshold) {
      return min < 0.f ? std::max(min, -threshold) : 0.f;
    };
    std::set<std::string> emitted;
    for (const auto& t : tensors) {
      if (!used.count(t)) continue;
      const Range& own = ranges.at(t);
      emitted.insert(t);
      auto g = group_of.find(t);
      if (g == group_of.end()) {
        emit(t, own, low(own.min, own.threshold));
        continue;
      }
      const Group& gr = groups[g->second];
      if (summary && (gr.threshold > own.threshold || gr.is_signed != (own.min < 0.f)))
        ++summary->widened_scales;
      emit(t, Range{own.min, own.max, gr.threshold, {}},
           gr.is_signed ? low(gr.min, gr.threshold) : 0.f);
    }
    // Group members no quantized node reads directly (a Split's input, a MaxPool's output).
    for (const auto& [t, g] : group_of) {
      if (emitted.count(t)) continue;
      const Group& gr = groups[g];
      auto r = ranges.find(t);
      emit(t,
           Range{r != ranges.end() ? r->second.min : gr.min,
                 r != ranges.end() ? r->second.max : gr.max,
                 gr.threshold,
                 {}},
           gr.is_signed ? low(gr.min, gr.threshold) : 0.f);
    }
    for (const auto& c : selected) {
      plan.nodes.push_back(c.node);
      if (summary) summary->quantized_nodes.push_back(c.node);
    }
    for (const auto& c : concats) {
      if (!shared.count(c.node)) continue;
      plan.shared_concats.push_back(c.node);
      if (summary)
        ++(c.op_type == "Concat"             ? summary->shared_concats
           : c.op_type == "MaxPool"          ? summary->shared_pools
           : quant::IsAveragingOp(c.op_type) ? summary->shared_averages
                                             : summary->shared_moves);
    }
    return plan;
  }
  // Method auto: per planned per-tensor activation in graph order, each method's threshold is
  // tried with the others fixed (starting from percentile's), and the one giving the model
  // outputs closest to float's on auto_batch kept. One quantized model per distinct candidate.
  Status RunAutoSearch() {
    if (method != quant::Method::kAuto || from_cache || auto_done) return OkStatus();
    if (auto_batch.empty()) return InvalidArgument("method auto: no sample reached its search");
    SessionOptions so;
    so.num_threads = options.num_threads;
    KILN_ASSIGN_OR_RETURN(auto fs, SessionAccess::LoadFromGraph(*graph, so));
    std::vector<NamedTensor> ref;
    KILN_RETURN_IF_ERROR(fs->Run(auto_batch, &ref));
    // Sum over the float outputs of |float - int8|^2 / |float|^2.
    auto error = [&]() -> StatusOr<double> {
      ir::Graph qdq = *graph;
      KILN_RETURN_IF_ERROR(quant::RewriteQdq(&qdq, BuildPlan(nullptr)));
      KILN_ASSIGN_OR_RETURN(auto qs, SessionAccess::LoadFromGraph(std::move(qdq), so));
      std::vector<NamedTensor> got;
      KILN_RETURN_IF_ERROR(qs->Run(auto_batch, &got));
      ++auto_evaluations;
      double e = 0;
      for (size_t o = 0; o < ref.size() && o < got.size(); ++o) {
        const Tensor& a = ref[o].tensor;
        const Tensor& b = got[o].tensor;
        if (a.dtype() != DataType::kFloat || b.dtype() != DataType::kFloat ||
            a.numel() != b.numel())
          continue;
        double d = 0, n = 0;
        for (int64_t i = 0; i < a.numel(); ++i) {
          const double x = a.data<float>()[i], y = b.data<float>()[i];
          d += (x - y) * (x - y), n += x * x;
        }
        e += d / std::max(n, 1e-30);
      }
      return e;
    };
    KILN_ASSIGN_OR_RETURN(auto_error_start, error());
    double best = auto_error_start;
    std::set<std::string> planned;
    for (const auto& a : BuildPlan(nullptr).activations)
      if (a.channel_scales.empty()) planned.insert(a.tensor);
    for (const auto& t : tensors) {
      if (!planned.count(t)) continue;
      Range& r = ranges.at(t);
      float kept = r.threshold;
      std::string kept_method = quant::MethodName(quant::Method::kPercentile);
      std::vector<float> tried = {kept};
      for (const auto& candidate : candidates.at(t)) {
        const quant::Method m = candidate.first;
        const float thr = candidate.second;  // a plain local: clang before 16 cannot capture a
                                             // structured binding in the lambda below
        if (thr <= 0.f || std::any_of(tried.begin(), tried.end(), [&](float v) {
              return std::fabs(v - thr) <= 1e-4f * std::max(v, thr);
            }))
          continue;  // the same threshold (within float noise) as one tried
        tried.push_back(thr);
        r.threshold = thr;
        KILN_ASSIGN_OR_RETURN(double e, error());
        if (e < best) best = e, kept = thr, kept_method = quant::MethodName(m);
      }
      r.threshold = kept;
      chosen[t] = kept_method;
    }
    auto_error = best;
    auto_done = true;
    return OkStatus();
  }
  // Adds, per convolution, the per-channel sums of float minus int8 output of one run of
  // bias_session.
  void AddBiasErrors(const std::vector<NamedTensor>& outs) {
    std::map<std::string, const Tensor*> got;
    for (const auto& o : outs) got[o.name] = &o.tensor;
    for (const auto& [name, probe] : bias_probe) {
      auto f = got.find(name), q = got.find(probe);
      if (f == got.end() || q == got.end() || f->second->rank() < 2 ||
          q->second->shape() != f->second->shape() || f->second->numel() == 0)
        continue;
      const Shape& s = f->second->shape();
      const int64_t n = s[0], c = s[1], inner = f->second->numel() / (n * c);
      auto& sum = bias_sum[name];
      sum.resize(static_cast<size_t>(c), 0.0);
      const float* a = f->second->data<float>();
      const float* b = q->second->data<float>();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t ch = 0; ch < c; ++ch) {
          double d = 0;
          const int64_t base = (i * c + ch) * inner;
          for (int64_t k = 0; k < inner; ++k) d += double(a[base + k]) - b[base + k];
          sum[ch] += d;
        }
      bias_count[name] += n * inner;
    }
  }
  // The bias-correction model (see bias_session): every quantized convolution twice, float and
  // int8 (with the plan's weights and input quantization), on the same float input.
  StatusOr<ir::Graph> BiasProbeModel() {
    static const std::string kSuffix = "_kiln_bias_probe";
    const quant::QdqPlan full = BuildPlan(nullptr);
    quant::QdqPlan probe;
    probe.per_channel = full.per_channel;
    std::vector<std::string> convs;
    std::set<std::string> inputs;
    bias_probe.clear();
    for (const auto& c : selected)
      if (c.op_type == "Conv" && !c.output.empty()) {
        convs.push_back(c.node);
        probe.nodes.push_back(c.node + kSuffix);
        inputs.insert(c.activation);
        bias_probe[c.output] = c.output + kSuffix;
      }
    for (const auto& a : full.activations)
      if (inputs.count(a.tensor)) probe.activations.push_back(a);
    ir::Graph copies = *graph;
    KILN_RETURN_IF_ERROR(quant::AddIsolatedCopies(&copies, convs, kSuffix));
    KILN_RETURN_IF_ERROR(quant::RewriteQdq(&copies, probe));
    return copies;
  }
};

std::string CalibrationDataKey(const Tensor& samples, int64_t count) {
  const int64_t rows = samples.rank() > 0 ? samples.shape()[0] : 1;
  count = std::max<int64_t>(0, std::min(count, rows));
  const size_t bytes = rows > 0 ? samples.bytes() / static_cast<size_t>(rows) * count : 0;
  std::string key =
      runtime::ContentHash(std::string_view(static_cast<const char*>(samples.raw()), bytes));
  return key + " " + DataTypeName(samples.dtype()) + ShapeToString(samples.shape()) + " first " +
         std::to_string(count);
}

Quantizer::Quantizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Quantizer::~Quantizer() = default;

StatusOr<std::unique_ptr<Quantizer>> Quantizer::Create(const std::string& model_path,
                                                       const QuantizeOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  KILN_ASSIGN_OR_RETURN(impl->method, quant::ParseMethod(options.method));
  if (options.percentile <= 0 || options.percentile > 100)
    return InvalidArgument("the percentile must be in (0, 100]; got " +
                           std::to_string(options.percentile));
  if (options.histogram_bins < 256 || options.histogram_bins > (1 << 20))
    return InvalidArgument("histogram bins must be in [256, 1048576]; got " +
                           std::to_string(options.histogram_bins));
  std::ifstream f(model_path, std::ios::binary);
  if (!f) return NotFound("cannot open model '" + model_path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string bytes = ss.str();
  std::string model_dir = std::filesystem::path(model_path).parent_path().string();
  if (model_dir.empty()) model_dir = ".";
  // The model in kiln's IR, its Constant nodes hoisted (the quantizer's weights are constants).
  auto load = [&](const std::string& b) -> StatusOr<std::shared_ptr<const ir::Graph>> {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<ir::Graph> g, onnxio::LoadModelFromBytes(b, model_dir));
    KILN_RETURN_IF_ERROR(quant::HoistConstants(g.get()));
    return std::shared_ptr<const ir::Graph>(std::move(g));
  };
  auto graph = load(bytes);
  if (!graph.ok())
    return Status(graph.status().code(), graph.status().message() + " (" + model_path + ")");
  impl->graph = std::move(*graph);
  std::optional<quant::QdqModelInfo> info = quant::InspectForQdq(*impl->graph);
  impl->opset = info->opset;
  impl->model_hash = runtime::ContentHash(bytes);
  if (impl->opset < 13) {
    // Per-tensor weight scales collapse depthwise layers (one outlier channel sets the scale of
    // all): convert to opset 13 for per-channel ones, as ONNX Runtime's quantizer does. Below
    // opset 10 (no QuantizeLinear at all) the conversion is required. The first calibration batch
    // runs both forms and compares their outputs (ObserveChunk).
    auto converted = onnxio::ConvertToOpset13(bytes);
    auto converted_graph = converted.ok() ? load(*converted) : converted.status();
    if (converted_graph.ok()) {
      impl->converted_from_opset = impl->opset;
      impl->original = std::move(impl->graph);
      impl->graph = std::move(*converted_graph);
      info = quant::InspectForQdq(*impl->graph);
      impl->opset = info->opset;
    } else if (impl->opset < 10) {
      return Unsupported(
          "INT8 QDQ models need opset 10 or newer; '" + model_path + "' imports opset " +
          std::to_string(impl->opset) +
          " and could not be converted to 13: " + converted_graph.status().message());
    } else {
      impl->per_tensor_reason = converted_graph.status().message();
    }
  }
  bytes.clear();
  bytes.shrink_to_fit();

  impl->concats = info->concats;
  std::vector<const quant::QdqCandidate*> valid;
  for (const auto& c : info->candidates) {
    if (!c.reason.empty())
      impl->float_nodes.emplace_back(c.node, c.reason);
    else
      valid.push_back(&c);
  }
  // The input and output layers (a detector's every head) where the graph says which
  // (quant::QdqCandidate), else the first and last in graph order.
  const bool walked = std::any_of(valid.begin(), valid.end(),
                                  [](const auto* c) { return c->input_layer || c->output_layer; });
  for (size_t i = 0; i < valid.size(); ++i) {
    const auto& c = *valid[i];
    std::string why = KeptBy(c.node, c.op_type, options.keep_float);
    if (why.empty() && !options.quantize_all && valid.size() > 1) {
      if (walked ? c.input_layer : i == 0)
        why = "first quantizable layer (kept float by default; --quantize-all)";
      if (walked ? c.output_layer : i + 1 == valid.size())
        why = std::string(walked ? "an output layer: it feeds a model output through no other "
                                   "quantizable node"
                                 : "last quantizable layer") +
              " (kept float by default; --quantize-all)";
    }
    if (!why.empty())
      impl->float_nodes.emplace_back(c.node, why);
    else
      impl->selected.push_back(c);
  }
  if (impl->selected.empty()) {
    std::string why = info->candidates.empty() ? "the model has no Conv, Gemm or MatMul node"
                                               : "every quantizable node is kept float:";
    for (const auto& [node, reason] : impl->float_nodes) why += " " + node + " (" + reason + ");";
    return InvalidArgument("nothing to quantize in '" + model_path + "': " + why);
  }
  // Every quantizable node's activation is calibrated (also those kept float), so a calibration
  // cache serves any --keep-float / --quantize-all choice later.
  std::set<std::string> seen;
  for (const auto* c : valid)
    if (seen.insert(c->activation).second) impl->tensors.push_back(c->activation);
  // Residual Adds after a quantizable convolution: both inputs calibrated (whether or not
  // quantize_adds is on, so a cache serves both choices).
  std::set<std::string> conv_outputs;
  for (const auto* c : valid)
    if (c->op_type == "Conv" && !c->output.empty()) {
      conv_outputs.insert(c->output);
      if (!c->activated.empty()) conv_outputs.insert(c->activated);
    }
  for (const auto& a : info->adds) {
    if (!conv_outputs.count(a.inputs[0]) && !conv_outputs.count(a.inputs[1])) continue;
    impl->adds.push_back(a);
    for (const auto& in : a.inputs)
      if (seen.insert(in).second) impl->tensors.push_back(in);
  }
  // AveragePools: input and output calibrated, to decide whether the output may take the input's
  // scale (PlanScaleGroups).
  for (const auto& c : info->concats)
    if (quant::IsAveragingOp(c.op_type))
      for (const std::string& t : {c.inputs[0], c.output})
        if (seen.insert(t).second) impl->tensors.push_back(t);
  for (const auto& t : impl->tensors) impl->stats[t];
  if (options.channel_activations && impl->opset >= 13) {
    std::map<std::string, bool> all_depthwise;
    for (const auto* c : valid) {
      auto [it, added] = all_depthwise.emplace(c->activation, c->depthwise);
      if (!added) it->second = it->second && c->depthwise;
    }
    for (const auto& [t, dw] : all_depthwise)
      if (dw) {
        impl->channel_tensors.insert(t);
        impl->channel_stats[t];
      }
  }

  ir::Graph calib = *impl->graph;
  KILN_RETURN_IF_ERROR(quant::AddOutputs(&calib, impl->tensors));
  SessionOptions so;
  so.num_threads = options.num_threads;
  auto session = SessionAccess::LoadFromGraph(std::move(calib), so);
  if (!session.ok())
    return Status(session.status().code(), session.status().message() +
                                               "\n  while loading the calibration model of '" +
                                               model_path + "'");
  impl->session = std::move(*session);
  return std::unique_ptr<Quantizer>(new Quantizer(std::move(impl)));
}

const std::vector<TensorSpec>& Quantizer::inputs() const { return impl_->session->inputs(); }

int Quantizer::passes() const {
  return impl_->range_passes() + impl_->auto_passes() + (impl_->options.bias_correction ? 1 : 0);
}

StatusOr<bool> Quantizer::UseCache(const std::string& path, const std::string& data_key) {
  if (impl_->pass >= 0) return InvalidArgument("UseCache must come before the first pass");
  nlohmann::json keys = {{"format", "kiln calibration cache 1"},
                         {"kiln_version", KILN_VERSION_TEXT},
                         {"model_hash", impl_->model_hash},
                         {"calibration_data", data_key},
                         {"method", quant::MethodName(impl_->method)},
                         {"percentile", impl_->options.percentile},
                         {"histogram_bins", impl_->options.histogram_bins}};
  // Only when on, so that caches written without it stay valid.
  if (impl_->options.channel_activations) keys["channel_activations"] = "depthwise";
  impl_->cache_path = path;
  impl_->cache_keys = keys;
  std::ifstream f(path);
  if (!f) {
    if (std::filesystem::exists(path))
      return InvalidArgument("calibration cache '" + path + "' exists but cannot be read");
    return false;
  }
  nlohmann::json doc;
  try {
    f >> doc;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("calibration cache '" + path + "' is not valid JSON: " + e.what());
  }
  if (!doc.is_object() || !doc.contains("keys") || !doc["keys"].is_object() ||
      !doc.contains("tensors") || !doc["tensors"].is_object())
    return InvalidArgument("calibration cache '" + path +
                           "' is not a kiln calibration cache (no keys/tensors)");
  // Every key of either side must match (a key only one side has is null on the other).
  std::set<std::string> names;
  for (auto it = keys.begin(); it != keys.end(); ++it) names.insert(it.key());
  for (auto it = doc["keys"].begin(); it != doc["keys"].end(); ++it) names.insert(it.key());
  for (const auto& name : names) {
    const nlohmann::json have = doc["keys"].contains(name) ? doc["keys"][name] : nlohmann::json();
    const nlohmann::json want = keys.contains(name) ? keys[name] : nlohmann::json();
    if (have != want)
      return InvalidArgument("calibration cache '" + path + "' was made for another " + name +
                             ": the cache has " + have.dump() + ", this run " + want.dump() +
                             "; delete it or pass another --cache file");
  }
  std::map<std::string, Impl::Range> ranges;
  for (const auto& t : impl_->tensors) {
    if (!doc["tensors"].contains(t))
      return InvalidArgument("calibration cache '" + path + "' has no range for tensor '" + t +
                             "'");
    const auto& r = doc["tensors"][t];
    try {
      ranges[t] = {
          r.at("min").get<float>(), r.at("max").get<float>(), r.at("threshold").get<float>(), {}};
      if (impl_->channel_tensors.count(t))
        ranges[t].channel_thresholds = r.at("channel_thresholds").get<std::vector<float>>();
      if (r.contains("method")) impl_->chosen[t] = r.at("method").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      return InvalidArgument("calibration cache '" + path + "': tensor '" + t + "': " + e.what());
    }
  }
  impl_->ranges = std::move(ranges);
  impl_->samples = doc.value("samples", int64_t{0});
  impl_->from_cache = true;
  return true;
}

StatusOr<std::vector<LayerError>> Quantizer::Compare(const std::vector<NamedTensor>& batch) {
  if (!impl_->written) return InvalidArgument("Compare before Write");
  std::vector<std::string> names;
  for (const auto& c : impl_->selected)
    if (!c.output.empty()) names.push_back(c.output);
  SessionOptions so;
  so.num_threads = impl_->options.num_threads;
  std::vector<NamedTensor> a, b;
  // Both sessions live until the comparison is done: their outputs may be views of their memory.
  std::unique_ptr<Session> sessions[2];
  for (int i = 0; i < 2; ++i) {
    ir::Graph with = i == 0 ? *impl_->graph : *impl_->written;
    KILN_RETURN_IF_ERROR(quant::AddOutputs(&with, names));
    KILN_ASSIGN_OR_RETURN(sessions[i], SessionAccess::LoadFromGraph(std::move(with), so));
    KILN_RETURN_IF_ERROR(sessions[i]->Run(batch, i == 0 ? &a : &b));
  }
  std::map<std::string, const Tensor*> got;
  for (const auto& o : b) got[o.name] = &o.tensor;
  std::map<std::string, std::string> node_of;
  for (const auto& c : impl_->selected) node_of[c.output] = c.node;
  std::vector<LayerError> out;
  auto compare = [&](const NamedTensor& ref, const std::string& node) {
    auto it = got.find(ref.name);
    if (it == got.end() || ref.tensor.dtype() != DataType::kFloat ||
        it->second->numel() != ref.tensor.numel())
      return;
    const float* x = ref.tensor.data<float>();
    const float* y = it->second->data<float>();
    double dot = 0, nx = 0, ny = 0;
    LayerError e{node, ref.name};
    for (int64_t i = 0; i < ref.tensor.numel(); ++i) {
      dot += double(x[i]) * y[i], nx += double(x[i]) * x[i], ny += double(y[i]) * y[i];
      e.max_abs = std::max(e.max_abs, double(std::fabs(x[i] - y[i])));
      e.max_ref = std::max(e.max_ref, double(std::fabs(x[i])));
    }
    e.cosine = nx > 0 && ny > 0 ? dot / std::sqrt(nx * ny) : (nx == ny ? 1.0 : 0.0);
    out.push_back(e);
  };
  for (const auto& c : impl_->selected)
    for (const auto& r : a)
      if (r.name == c.output) compare(r, c.node);
  for (const auto& r : a)
    if (!node_of.count(r.name)) compare(r, "(model output)");
  return out;
}

Status Quantizer::WriteTensorRtCache(const std::string& path) const {
  if (impl_->ranges.empty()) return InvalidArgument("WriteTensorRtCache before Write");
  std::ofstream f(path, std::ios::trunc);
  if (!f) return InvalidArgument("cannot write '" + path + "'");
  f << "TRT-8600-EntropyCalibration2\n";
  for (const auto& t : impl_->tensors) {
    const float scale = std::max(impl_->ranges.at(t).threshold, 1e-12f) / 127.f;
    uint32_t bits;
    std::memcpy(&bits, &scale, 4);
    char hex[16];
    std::snprintf(hex, sizeof(hex), "%08x", bits);
    f << t << ": " << hex << "\n";
  }
  if (!f.good()) return Internal("failed writing '" + path + "'");
  return OkStatus();
}

Status Quantizer::BeginPass(int pass) {
  if (pass < 0 || pass >= passes() || pass != impl_->pass + 1)
    return InvalidArgument("calibration passes run in order 0.." + std::to_string(passes() - 1) +
                           "; got pass " + std::to_string(pass) + " after " +
                           std::to_string(impl_->pass));
  if (pass == 0 && !impl_->from_cache) impl_->samples = 0;
  if (impl_->auto_passes() > 0 && pass == impl_->range_passes()) {  // the auto search's pass
    if (impl_->samples == 0)
      return InvalidArgument("the first calibration pass observed no sample");
    KILN_RETURN_IF_ERROR(impl_->ComputeRanges());
  } else if (pass == impl_->bias_pass()) {  // the bias-correction pass
    if (impl_->range_passes() > 0 && impl_->samples == 0)
      return InvalidArgument("the first calibration pass observed no sample");
    KILN_RETURN_IF_ERROR(impl_->ComputeRanges());
    KILN_RETURN_IF_ERROR(impl_->RunAutoSearch());
    KILN_ASSIGN_OR_RETURN(ir::Graph probe, impl_->BiasProbeModel());
    SessionOptions so;
    so.num_threads = impl_->options.num_threads;
    KILN_ASSIGN_OR_RETURN(impl_->bias_session, SessionAccess::LoadFromGraph(std::move(probe), so));
  } else if (pass == 1) {
    if (impl_->samples == 0)
      return InvalidArgument("the first calibration pass observed no sample");
    for (auto& [name, s] : impl_->stats) s.BeginHistogram(impl_->options.histogram_bins);
    for (auto& [name, v] : impl_->channel_stats)
      for (auto& s : v) s.BeginHistogram(impl_->options.histogram_bins);
  }
  impl_->pass = pass;
  return OkStatus();
}

Status Quantizer::Observe(const std::vector<NamedTensor>& batch) {
  if (impl_->pass < 0) return InvalidArgument("Observe before BeginPass(0)");
  if (impl_->auto_passes() > 0 && impl_->pass == impl_->range_passes()) {  // auto: keep a batch
    if (impl_->auto_batch.empty()) impl_->auto_batch = batch;
    return OkStatus();
  }
  if (impl_->pass == impl_->bias_pass()) {  // bias correction
    std::vector<NamedTensor> outs;
    // Half the statistics passes' chunk: this model returns every convolution's output twice.
    for (const auto& chunk : Chunks(batch, std::max<int64_t>(1, impl_->options.run_batch / 2))) {
      outs.clear();
      KILN_RETURN_IF_ERROR(impl_->bias_session->Run(chunk, &outs));
      impl_->AddBiasErrors(outs);
    }
    impl_->bias_done = true;
    return OkStatus();
  }
  // The statistics passes run the calibration model on chunks of at most run_batch samples:
  // its memory is every quantized tensor of one chunk (the statistics are the same whatever
  // the chunking: each value is counted once).
  for (const auto& chunk : Chunks(batch, impl_->options.run_batch))
    KILN_RETURN_IF_ERROR(ObserveChunk(chunk));
  if (impl_->pass == 0 && !batch.empty() && batch[0].tensor.rank() > 0)
    impl_->samples += batch[0].tensor.shape()[0];
  return OkStatus();
}

// The converted model must compute what the original does: both run the first calibration chunk,
// and every output of the original must match the converted model's within 1e-4 (relative to
// max(1, |value|)): the conversion only rewrites ops whose meaning changed between opsets.
Status Quantizer::CheckConversion(const std::vector<NamedTensor>& batch,
                                  const std::vector<NamedTensor>& converted_outs) {
  KILN_ASSIGN_OR_RETURN(auto original, SessionAccess::LoadFromGraph(*impl_->original, {}));
  impl_->original.reset();
  std::vector<NamedTensor> want;
  KILN_RETURN_IF_ERROR(original->Run(batch, &want));
  double worst = 0;
  for (const auto& w : want) {
    const NamedTensor* g = nullptr;
    for (const auto& o : converted_outs)
      if (o.name == w.name) g = &o;
    if (g == nullptr || g->tensor.shape() != w.tensor.shape() ||
        g->tensor.dtype() != w.tensor.dtype())
      return Internal("the opset " + std::to_string(impl_->converted_from_opset) +
                      " -> 13 conversion changed output '" + w.name +
                      "' (missing, or its shape "
                      "or dtype differs)");
    if (w.tensor.dtype() != DataType::kFloat) continue;
    const float* a = w.tensor.data<float>();
    const float* b = g->tensor.data<float>();
    for (int64_t i = 0; i < w.tensor.numel(); ++i) {
      const double d = std::fabs(static_cast<double>(a[i]) - b[i]) /
                       std::max(1.0, std::fabs(static_cast<double>(a[i])));
      if (!(d <= 1e-4))
        return Internal("the opset " + std::to_string(impl_->converted_from_opset) +
                        " -> 13 conversion changed output '" + w.name + "': element " +
                        std::to_string(i) + " is " + std::to_string(b[i]) + ", the original " +
                        "model's " + std::to_string(a[i]));
      worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
    }
  }
  impl_->conversion_max_diff = worst;
  return OkStatus();
}

Status Quantizer::ObserveChunk(const std::vector<NamedTensor>& batch) {
  std::vector<NamedTensor> outs;
  KILN_RETURN_IF_ERROR(impl_->session->Run(batch, &outs));
  if (impl_->original) KILN_RETURN_IF_ERROR(CheckConversion(batch, outs));
  for (const auto& o : outs) {
    auto it = impl_->stats.find(o.name);
    if (it == impl_->stats.end()) continue;
    if (o.tensor.dtype() != DataType::kFloat)
      return Unsupported("tensor '" + o.name + "' is " + DataTypeName(o.tensor.dtype()) +
                         ", not float32: it cannot be calibrated");
    const float* x = o.tensor.data<float>();
    if (impl_->pass == 0)
      it->second.UpdateRange(x, o.tensor.numel());
    else
      it->second.UpdateHistogram(x, o.tensor.numel());
    auto ch = impl_->channel_stats.find(o.name);
    if (ch == impl_->channel_stats.end()) continue;
    // Per channel: each (sample, channel) slice of a [N, C, ...] tensor is contiguous.
    const Shape& shape = o.tensor.shape();
    if (shape.size() < 2 || shape[1] <= 0)
      return InvalidArgument("tensor '" + o.name + "' is " + ShapeToString(shape) +
                             ": per-channel scales need a channel axis 1");
    const int64_t n = shape[0], c = shape[1],
                  inner = o.tensor.numel() / std::max<int64_t>(1, n * c);
    if (ch->second.empty() && impl_->pass == 0) ch->second.resize(static_cast<size_t>(c));
    if (static_cast<int64_t>(ch->second.size()) != c)
      return InvalidArgument("tensor '" + o.name + "' has " + std::to_string(c) +
                             " channels in this batch and " + std::to_string(ch->second.size()) +
                             " in the first");
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < c; ++k) {
        const float* p = x + (i * c + k) * inner;
        if (impl_->pass == 0)
          ch->second[k].UpdateRange(p, inner);
        else
          ch->second[k].UpdateHistogram(p, inner);
      }
  }
  return OkStatus();
}

StatusOr<QuantizeSummary> Quantizer::Write(const std::string& out_path) {
  if (passes() > 0 && impl_->pass != passes() - 1)
    return InvalidArgument("Write before the last calibration pass (" + std::to_string(passes()) +
                           " passes; completed up to " + std::to_string(impl_->pass) + ")");
  QuantizeSummary summary;
  summary.method = quant::MethodName(impl_->method);
  summary.samples = impl_->samples;
  summary.float_nodes = impl_->float_nodes;
  summary.per_channel = impl_->opset >= 13;
  summary.converted_from_opset = impl_->converted_from_opset;
  summary.conversion_max_diff = impl_->conversion_max_diff;
  summary.per_tensor_reason = impl_->per_tensor_reason;
  KILN_RETURN_IF_ERROR(impl_->ComputeRanges());
  KILN_RETURN_IF_ERROR(impl_->RunAutoSearch());
  summary.auto_evaluations = impl_->auto_evaluations;
  summary.auto_error_start = impl_->auto_error_start;
  summary.auto_error = impl_->auto_error;
  if (!impl_->auto_batch.empty() && impl_->auto_batch[0].tensor.rank() > 0)
    summary.auto_samples = impl_->auto_batch[0].tensor.shape()[0];
  quant::QdqPlan plan = impl_->BuildPlan(&summary);
  if (impl_->bias_done) {
    for (const auto& c : impl_->selected) {
      auto s = impl_->bias_sum.find(c.output);
      const int64_t count = impl_->bias_count[c.output];
      if (c.op_type != "Conv" || s == impl_->bias_sum.end() || count == 0) continue;
      std::vector<float> shift(s->second.size());
      for (size_t k = 0; k < shift.size(); ++k)
        shift[k] = static_cast<float>(s->second[k] / static_cast<double>(count));
      plan.bias_shift[c.node] = std::move(shift);
      ++summary.bias_corrected;
    }
  }
  auto written = std::make_unique<ir::Graph>(*impl_->graph);
  KILN_RETURN_IF_ERROR(quant::RewriteQdq(written.get(), plan));
  KILN_ASSIGN_OR_RETURN(std::string out, onnxio::SerializeModel(*written));
  // The result must load here before it is written.
  auto check = Session::LoadFromBytes(out, SessionOptions{});
  if (!check.ok())
    return Internal("the quantized model does not load: " + check.status().message());
  std::ofstream f(out_path, std::ios::binary | std::ios::trunc);
  if (!f) return InvalidArgument("cannot write '" + out_path + "'");
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  if (!f.good()) return Internal("failed writing '" + out_path + "'");
  summary.model_bytes = static_cast<int64_t>(out.size());
  impl_->written = std::move(written);
  summary.from_cache = impl_->from_cache;
  if (!impl_->cache_path.empty() && !impl_->from_cache) {
    nlohmann::json doc = {{"keys", impl_->cache_keys}, {"samples", impl_->samples}};
    nlohmann::json& tensors = doc["tensors"] = nlohmann::json::object();
    for (const auto& [t, r] : impl_->ranges) {
      tensors[t] = {{"min", r.min}, {"max", r.max}, {"threshold", r.threshold}};
      if (!r.channel_thresholds.empty()) tensors[t]["channel_thresholds"] = r.channel_thresholds;
      auto m = impl_->chosen.find(t);  // method auto: the method the search kept
      if (m != impl_->chosen.end()) tensors[t]["method"] = m->second;
    }
    std::ofstream c(impl_->cache_path, std::ios::trunc);
    if (!c)
      return InvalidArgument("cannot write the calibration cache '" + impl_->cache_path + "'");
    c << doc.dump(1) << "\n";
    if (!c.good())
      return Internal("failed writing the calibration cache '" + impl_->cache_path + "'");
  }
  return summary;
}

}  // namespace kiln
