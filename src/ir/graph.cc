#include "ir/graph.h"

#include <queue>

namespace kiln::ir {

int64_t Node::GetInt(const std::string& n, int64_t def) const {
  auto it = attrs.find(n);
  return it == attrs.end() ? def : it->second.i;
}
float Node::GetFloat(const std::string& n, float def) const {
  auto it = attrs.find(n);
  return it == attrs.end() ? def : it->second.f;
}
std::string Node::GetString(const std::string& n, const std::string& def) const {
  auto it = attrs.find(n);
  return it == attrs.end() ? def : it->second.s;
}
std::vector<int64_t> Node::GetInts(const std::string& n, std::vector<int64_t> def) const {
  auto it = attrs.find(n);
  return it == attrs.end() ? def : it->second.ints;
}
std::vector<float> Node::GetFloats(const std::string& n, std::vector<float> def) const {
  auto it = attrs.find(n);
  return it == attrs.end() ? def : it->second.floats;
}
const Tensor* Node::GetTensor(const std::string& n) const {
  auto it = attrs.find(n);
  return it == attrs.end() || it->second.type != Attribute::Type::kTensor ? nullptr : &it->second.t;
}
std::string Node::Describe() const {
  return op_type + " node '" + name + "' (opset " + std::to_string(opset) + ")";
}

int Graph::FindValue(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? -1 : it->second;
}

int Graph::GetOrAddValue(const std::string& name) {
  auto it = index_.find(name);
  if (it != index_.end()) return it->second;
  int id = static_cast<int>(values.size());
  Value v;
  v.name = name;
  values.push_back(std::move(v));
  index_[name] = id;
  return id;
}

Status Graph::RebuildIndex() {
  std::map<std::string, int> index;
  for (size_t i = 0; i < values.size(); ++i)
    if (!index.emplace(values[i].name, static_cast<int>(i)).second)
      return Internal("graph value name '" + values[i].name + "' is used twice");
  index_ = std::move(index);
  return OkStatus();
}

StatusOr<std::vector<int>> Graph::TopologicalOrder() const {
  const size_t n = nodes.size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> consumers(values.size());
  for (size_t i = 0; i < n; ++i) {
    for (int v : nodes[i].inputs) {
      if (v < 0) continue;
      if (values[v].producer >= 0) {
        ++pending[i];
        consumers[v].push_back(static_cast<int>(i));
      }
    }
  }
  // Kahn's algorithm with a min-heap so the order is the file order whenever that is valid.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(static_cast<int>(i));
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int v : nodes[i].outputs) {
      if (v < 0) continue;
      for (int c : consumers[v])
        if (--pending[c] == 0) ready.push(c);
    }
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i)
      if (pending[i] > 0)
        return InvalidModel("graph has a cycle or an input produced nowhere: " +
                            nodes[i].Describe() + " never becomes ready");
  }
  return order;
}

}  // namespace kiln::ir
