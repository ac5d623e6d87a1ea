// Runs ONNX's own backend tests (Debian libonnx-testdata: node/, pytorch-converted/,
// pytorch-operator/, simple/) through kiln. A test directory is in scope when every node's op is
// in kInScopeOps (the foundation op list, independent of what kiln registers, so a missing op
// shows as a failure) and every tensor is float32/int32/int64/bool. Outputs are compared with
// exact dtype and shape, floats within rtol 1e-3 / atol 1e-5, other types exactly.
// skip_list.txt ($KILN_ONNX_SKIP_LIST) lists expected failures by reason; a listed test that
// passes fails.
// Prints "N passed, M failed, K skipped" at the end. Root: $KILN_ONNX_TESTDATA_DIR or
// /usr/share/libonnx-testdata/data; a missing root or fewer in-scope cases than a floor fails
// (main() below).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "kiln/session.h"
#include "onnx/tensor_proto.h"

namespace fs = std::filesystem;

namespace {

const std::set<std::string> kInScopeOps = {"Conv",
                                           "ConvTranspose",
                                           "BatchNormalization",
                                           "InstanceNormalization",
                                           "GroupNormalization",
                                           "GridSample",
                                           "AffineGrid",
                                           "Col2Im",
                                           "DeformConv",
                                           "Gelu",
                                           "IsNaN",
                                           "IsInf",
                                           "LayerNormalization",
                                           "LRN",
                                           "Relu",
                                           "LeakyRelu",
                                           "PRelu",
                                           "Elu",
                                           "Selu",
                                           "Clip",
                                           "Sigmoid",
                                           "HardSigmoid",
                                           "HardSwish",
                                           "Tanh",
                                           "Erf",
                                           "Softplus",
                                           "Add",
                                           "Sub",
                                           "Mul",
                                           "Div",
                                           "Pow",
                                           "Sqrt",
                                           "Exp",
                                           "Log",
                                           "Neg",
                                           "Abs",
                                           "Reciprocal",
                                           "Floor",
                                           "Ceil",
                                           "Min",
                                           "Max",
                                           "Sum",
                                           "Mean",
                                           "Equal",
                                           "Less",
                                           "Greater",
                                           "LessOrEqual",
                                           "GreaterOrEqual",
                                           "Where",
                                           "Not",
                                           "And",
                                           "Or",
                                           "MaxPool",
                                           "AveragePool",
                                           "GlobalAveragePool",
                                           "GlobalMaxPool",
                                           "Gemm",
                                           "MatMul",
                                           "Flatten",
                                           "Reshape",
                                           "Transpose",
                                           "Concat",
                                           "Split",
                                           "Slice",
                                           "Squeeze",
                                           "Unsqueeze",
                                           "Expand",
                                           "Tile",
                                           "Pad",
                                           "Resize",
                                           "Upsample",
                                           "DepthToSpace",
                                           "SpaceToDepth",
                                           "Softmax",
                                           "LogSoftmax",
                                           "ReduceMean",
                                           "ReduceSum",
                                           "ReduceMax",
                                           "ReduceMin",
                                           "ReduceL2",
                                           "ArgMax",
                                           "ArgMin",
                                           "TopK",
                                           "Shape",
                                           "Size",
                                           "Gather",
                                           "Cast",
                                           "Constant",
                                           "ConstantOfShape",
                                           "Range",
                                           "Identity",
                                           "Dropout",
                                           "QuantizeLinear",
                                           "DequantizeLinear",
                                           "DynamicQuantizeLinear",
                                           "QLinearConv",
                                           "ConvInteger",
                                           "QLinearMatMul",
                                           "MatMulInteger",
                                           "If",
                                           "Loop",
                                           "Scan",
                                           "LSTM",
                                           "GRU",
                                           "RNN",
                                           "NonMaxSuppression",
                                           "RoiAlign"};

const std::set<int> kInScopeTypes = {1, 6, 7, 9};  // float, int32, int64, bool
// The quantization ops' tests also bring uint8, int8, uint16 and int16 (other ops' tests of these
// types stay out of scope: kiln's elementwise kernels do not compute on them).
const std::set<std::string> kQuantOps = {
    "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv",
    "ConvInteger",    "QLinearMatMul",    "MatMulInteger"};
const std::set<int> kQuantTypes = {1, 2, 3, 4, 5, 6, 7, 9};

std::string Root() {
  const char* e = std::getenv("KILN_ONNX_TESTDATA_DIR");
  return e ? e : "/usr/share/libonnx-testdata/data";
}

struct Case {
  std::string id;    // gtest-safe name: <suite>_<dir>
  std::string name;  // <suite>/<dir>, as in the skip list
  fs::path dir;
};

bool InScope(const fs::path& model_path) {
  onnx::ModelProto m;
  std::ifstream f(model_path, std::ios::binary);
  if (!m.ParseFromIstream(&f)) return false;
  const auto& g = m.graph();
  bool quant = false;
  for (const auto& n : g.node()) quant = quant || kQuantOps.count(n.op_type()) != 0;
  const std::set<int>& types = quant ? kQuantTypes : kInScopeTypes;
  auto TypeInScope = [&](const onnx::TypeProto& t) {
    return t.has_tensor_type() && types.count(t.tensor_type().elem_type());
  };
  // Every node, those of If/Loop/Scan bodies included, and the bodies' inputs and outputs.
  std::function<bool(const onnx::GraphProto&)> nodes_in_scope = [&](const onnx::GraphProto& gp) {
    for (const auto& n : gp.node()) {
      if (!(n.domain().empty() || n.domain() == "ai.onnx") || !kInScopeOps.count(n.op_type()))
        return false;
      for (const auto& a : n.attribute()) {
        if (a.type() == onnx::AttributeProto::TENSOR && !types.count(a.t().data_type()))
          return false;
        if (a.type() == onnx::AttributeProto::GRAPH) {
          for (const auto& v : a.g().input())
            if (!TypeInScope(v.type())) return false;
          for (const auto& v : a.g().output())
            if (!TypeInScope(v.type())) return false;
          if (!nodes_in_scope(a.g())) return false;
        }
      }
      if (n.op_type() == "Cast" || n.op_type() == "ConstantOfShape") {
        for (const auto& a : n.attribute())
          if (a.name() == "to" && !types.count(static_cast<int>(a.i()))) return false;
      }
    }
    return true;
  };
  if (!nodes_in_scope(g)) return false;
  for (const auto& v : g.input())
    if (!TypeInScope(v.type())) return false;
  for (const auto& v : g.output())
    if (!TypeInScope(v.type())) return false;
  for (const auto& t : g.initializer())
    if (!types.count(t.data_type())) return false;
  return true;
}

std::vector<Case> Discover(int* out_of_scope) {
  std::vector<Case> cases;
  *out_of_scope = 0;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    fs::path dir = fs::path(Root()) / suite;
    if (!fs::is_directory(dir)) continue;
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(dir))
      if (fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const auto& d : dirs) {
      if (!InScope(d / "model.onnx")) {
        ++*out_of_scope;
        continue;
      }
      std::string s = suite;
      std::replace(s.begin(), s.end(), '-', '_');
      std::string id = s + "_" + d.filename().string();
      for (char& c : id)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      cases.push_back({id, std::string(suite) + "/" + d.filename().string(), d});
    }
  }
  return cases;
}

std::map<std::string, std::string> LoadSkipList() {
  std::map<std::string, std::string> skips;
  // $KILN_ONNX_SKIP_LIST for another data folder (the onnx wheel's has its own list).
  const char* path = std::getenv("KILN_ONNX_SKIP_LIST");
  std::ifstream f(path != nullptr ? path : KILN_SKIP_LIST);
  if (!f) {
    std::fprintf(stderr, "onnx-node: cannot read the skip list %s\n", path ? path : KILN_SKIP_LIST);
    std::exit(1);
  }
  std::string line, reason = "(no reason given)";
  while (std::getline(f, line)) {
    if (line.rfind("## ", 0) == 0) {
      reason = line.substr(3);
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    skips[line] = reason;
  }
  return skips;
}

// The absolute tolerance: 1e-5, or $KILN_ONNX_ATOL (tests/onnx_node/ort_compare.py runs kiln and
// ONNX Runtime at ONNX's own 1e-7 too).
double Atol() {
  static const double atol = [] {
    const char* e = std::getenv("KILN_ONNX_ATOL");
    return e ? std::atof(e) : 1e-5;
  }();
  return atol;
}

// Compares one output; returns "" when equal within tolerance, else a description.
std::string Compare(const kiln::Tensor& got, const kiln::Tensor& want) {
  if (got.dtype() != want.dtype())
    return std::string("dtype ") + kiln::DataTypeName(got.dtype()) + " != expected " +
           kiln::DataTypeName(want.dtype());
  if (got.shape() != want.shape())
    return "shape " + kiln::ShapeToString(got.shape()) + " != expected " +
           kiln::ShapeToString(want.shape());
  const int64_t n = want.numel();
  if (want.dtype() == kiln::DataType::kFloat) {
    const float* g = got.data<float>();
    const float* w = want.data<float>();
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; ++i) {
      bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
                std::fabs(g[i] - w[i]) <= Atol() + 1e-3 * std::fabs(w[i]);
      if (!ok && bad++ == 0) first = i;
    }
    if (bad)
      return std::to_string(bad) + " of " + std::to_string(n) + " values differ; first at " +
             std::to_string(first) + ": " + std::to_string(g[first]) + " vs expected " +
             std::to_string(w[first]);
    return "";
  }
  if (std::memcmp(got.raw(), want.raw(), want.bytes()) != 0) return "values differ";
  return "";
}

// Runs every test_data_set of the case; "" on success.
std::string RunCase(const Case& c) {
  auto session = kiln::Session::Load((c.dir / "model.onnx").string());
  if (!session.ok()) return "load: " + session.status().ToString();
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(c.dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return "no test_data_set_* directories";
  for (const auto& set : sets) {
    std::vector<kiln::NamedTensor> inputs;
    const auto& specs = (*session)->inputs();
    for (size_t i = 0; i < specs.size(); ++i) {
      fs::path p = set / ("input_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) break;
      auto t = kiln::onnxio::ReadTensorProtoFile(p.string());
      if (!t.ok()) return t.status().ToString();
      inputs.push_back({specs[i].name, *t});
    }
    std::vector<kiln::NamedTensor> outputs;
    kiln::Status s = (*session)->Run(inputs, &outputs);
    if (!s.ok()) return set.filename().string() + ": " + s.ToString();
    for (size_t i = 0; i < outputs.size(); ++i) {
      fs::path p = set / ("output_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) continue;
      auto want = kiln::onnxio::ReadTensorProtoFile(p.string());
      if (!want.ok()) return want.status().ToString();
      std::string diff = Compare(outputs[i].tensor, *want);
      if (!diff.empty())
        return set.filename().string() + " output '" + outputs[i].name + "': " + diff;
    }
  }
  return "";
}

struct Tally {
  int passed = 0, failed = 0, skipped = 0;
};
Tally& Counts() {
  static Tally t;
  return t;
}

class OnnxNodeTest : public testing::TestWithParam<Case> {};

// $KILN_ONNX_REPORT: one line per case, "<suite>/<dir>\tpass|fail\t<reason>", for comparisons
// with other runtimes (ort_compare.py); the skip list does not apply to it.
void Report(const Case& c, const std::string& err) {
  const char* path = std::getenv("KILN_ONNX_REPORT");
  if (path == nullptr) return;
  std::ofstream f(path, std::ios::app);
  std::string reason = err;
  std::replace(reason.begin(), reason.end(), '\n', ' ');
  f << c.name << '\t' << (err.empty() ? "pass" : "fail") << '\t' << reason << '\n';
}

TEST_P(OnnxNodeTest, MatchesExpectedOutputs) {
  static const auto skips = LoadSkipList();
  const Case& c = GetParam();
  std::string err = RunCase(c);
  Report(c, err);
  auto it = skips.find(c.name);
  if (it != skips.end()) {
    if (err.empty()) {
      ++Counts().failed;
      FAIL() << c.name << " is in skip_list.txt (" << it->second
             << ") but now passes: remove it from the list";
    }
    ++Counts().skipped;
    GTEST_SKIP() << it->second << " [" << err << "]";
  }
  if (err.empty()) {
    ++Counts().passed;
  } else {
    ++Counts().failed;
    FAIL() << c.name << ": " << err;
  }
}

int g_out_of_scope = 0;
std::vector<Case> AllCases() {
  static const std::vector<Case> cases = Discover(&g_out_of_scope);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Onnx, OnnxNodeTest, testing::ValuesIn(AllCases()),
                         [](const testing::TestParamInfo<Case>& i) { return i.param.id; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OnnxNodeTest);

class Summary : public testing::Environment {
 public:
  void TearDown() override {
    std::printf(
        "ONNX backend tests from %s: %zu in scope, %d out of scope (ops or dtypes outside "
        "the foundation list)\n",
        Root().c_str(), AllCases().size(), g_out_of_scope);
    std::printf("onnx-node: %d passed, %d failed, %d skipped\n", Counts().passed, Counts().failed,
                Counts().skipped);
  }
};

}  // namespace

// A run that finds no data, or far fewer cases than Debian's libonnx-testdata 1.12 holds (589 in
// scope on 2026-11-21), fails instead of passing with nothing checked. The floor is
// $KILN_ONNX_MIN_CASES when set (another data folder), else 580.
int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::error_code ec;
  if (!fs::is_directory(fs::path(Root()) / "node", ec)) {
    std::fprintf(stderr,
                 "onnx-node: FAILED: no ONNX test data at %s (expected %s/node/test_*/; install "
                 "Debian's libonnx-testdata or set KILN_ONNX_TESTDATA_DIR)\n",
                 Root().c_str(), Root().c_str());
    return 1;
  }
  const char* floor_env = std::getenv("KILN_ONNX_MIN_CASES");
  const size_t floor = floor_env ? std::strtoul(floor_env, nullptr, 10) : 580;
  if (AllCases().size() < floor) {
    std::fprintf(stderr,
                 "onnx-node: FAILED: %zu cases in scope under %s, fewer than the floor of %zu "
                 "(KILN_ONNX_MIN_CASES); the data folder is incomplete or the scope shrank\n",
                 AllCases().size(), Root().c_str(), floor);
    return 1;
  }
  testing::AddGlobalTestEnvironment(new Summary);
  return RUN_ALL_TESTS();
}
