// Names for values and nodes a rewrite adds to a graph: `base` when no name in the graph has it,
// else `base_1`, `base_2`, ..., each one taken once made. The quantizer's QDQ rewrite
// (quant/qdq_graph.cc, on kiln's IR) and the opset conversion (onnx/opset_convert.cc, on ONNX's
// protos) use it; passes on the IR have passes::GraphEditor::UniqueName.
#pragma once

#include <set>
#include <string>
#include <utility>

namespace kiln {

class FreshNames {
 public:
  // Marks `name` as used (the graph's own names, before any is made).
  void Take(std::string name) { used_.insert(std::move(name)); }

  std::string Make(const std::string& base) {
    std::string name = base;
    for (int k = 1; used_.count(name) != 0; ++k) name = base + "_" + std::to_string(k);
    used_.insert(name);
    return name;
  }

 private:
  std::set<std::string> used_;
};

}  // namespace kiln
