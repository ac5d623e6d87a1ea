// Runs ONNX's own backend tests (Debian libonnx-testdata: node/, pytorch-converted/,
// pytorch-operator/, simple/) through kiln: every test directory, whatever its ops and dtypes.
// Outputs are compared with exact dtype and shape, floats within rtol 1e-3 / atol 1e-5, other
// types exactly. skip_list.txt ($KILN_ONNX_SKIP_LIST) lists the expected failures grouped by
// reason (ops and dtypes not implemented yet among them; update_skip_list.py regroups it); a
// listed test that passes fails, so the list only shrinks.
// Prints "N passed, M failed, K skipped" at the end. Root: $KILN_ONNX_TESTDATA_DIR or
// /usr/share/libonnx-testdata/data; a missing root or fewer cases than a floor fails (main()).
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
#include <memory>
#include <set>
#include <sstream>

#include "kiln/session.h"
#include "onnx/tensor_proto.h"

namespace fs = std::filesystem;

namespace {

std::string Root() {
  const char* e = std::getenv("KILN_ONNX_TESTDATA_DIR");
  return e ? e : "/usr/share/libonnx-testdata/data";
}

struct Case {
  std::string id;    // gtest-safe name: <suite>_<dir>
  std::string name;  // <suite>/<dir>, as in the skip list
  fs::path dir;
};

std::vector<Case> Discover() {
  std::vector<Case> cases;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    fs::path dir = fs::path(Root()) / suite;
    if (!fs::is_directory(dir)) continue;
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(dir))
      if (fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const auto& d : dirs) {
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

// Compares one output; returns "" when equal within tolerance, else a description. Sequences and
// optionals item by item, strings exactly.
std::string Compare(const kiln::Tensor& got, const kiln::Tensor& want) {
  if (got.dtype() != want.dtype())
    return std::string("dtype ") + kiln::DataTypeName(got.dtype()) + " != expected " +
           kiln::DataTypeName(want.dtype());
  if (kiln::IsSequenceType(want.dtype()) || kiln::IsOptionalType(want.dtype())) {
    if (got.items().size() != want.items().size())
      return std::to_string(got.items().size()) + " items != expected " +
             std::to_string(want.items().size());
    for (size_t i = 0; i < want.items().size(); ++i) {
      std::string d = Compare(got.items()[i], want.items()[i]);
      if (!d.empty()) return "item " + std::to_string(i) + ": " + d;
    }
    return "";
  }
  if (got.shape() != want.shape())
    return "shape " + kiln::ShapeToString(got.shape()) + " != expected " +
           kiln::ShapeToString(want.shape());
  const int64_t n = want.numel();
  // float32 and float64 at ONNX's tolerance (summation order may differ from numpy's); every
  // other type bit for bit.
  auto within = [&](auto tag) -> std::string {
    using T = decltype(tag);
    const T* g = got.data<T>();
    const T* w = want.data<T>();
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
  };
  if (want.dtype() == kiln::DataType::kFloat) return within(float{});
  if (want.dtype() == kiln::DataType::kDouble) return within(double{});
  if (want.dtype() == kiln::DataType::kString) {
    for (int64_t i = 0; i < n; ++i)
      if (got.data<std::string>()[i] != want.data<std::string>()[i])
        return "string " + std::to_string(i) + " '" + got.data<std::string>()[i] +
               "' != expected '" + want.data<std::string>()[i] + "'";
    return "";
  }
  if (std::memcmp(got.raw(), want.raw(), want.bytes()) != 0) return "values differ";
  return "";
}

// A test-data file: a TensorProto, or a SequenceProto / OptionalProto where the model declares a
// sequence or optional.
kiln::StatusOr<kiln::Tensor> ReadValue(const fs::path& p, kiln::DataType declared) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f) return kiln::NotFound("cannot read '" + p.string() + "'");
  auto v = kiln::onnxio::ParseValueProto(ss.str(), declared);
  // ONNX 1.12's test data (numpy had no bfloat16) stores bfloat16 tensors as uint16 with the same
  // bits: read them as the bfloat16 the model declares.
  if (v.ok() && declared == kiln::DataType::kBFloat16 && v->dtype() == kiln::DataType::kUInt16)
    return kiln::Tensor::Adopt(kiln::DataType::kBFloat16, v->shape(), v->raw(),
                               std::make_shared<kiln::Tensor>(*v));
  return v;
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
      auto t = ReadValue(p, specs[i].dtype);
      if (!t.ok()) return t.status().ToString();
      inputs.push_back({specs[i].name, *t});
    }
    std::vector<kiln::NamedTensor> outputs;
    kiln::Status s = (*session)->Run(inputs, &outputs);
    if (!s.ok()) return set.filename().string() + ": " + s.ToString();
    for (size_t i = 0; i < outputs.size(); ++i) {
      fs::path p = set / ("output_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) continue;
      auto want = ReadValue(p, (*session)->outputs()[i].dtype);
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

std::vector<Case> AllCases() {
  static const std::vector<Case> cases = Discover();
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Onnx, OnnxNodeTest, testing::ValuesIn(AllCases()),
                         [](const testing::TestParamInfo<Case>& i) { return i.param.id; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OnnxNodeTest);

class Summary : public testing::Environment {
 public:
  void TearDown() override {
    std::printf("ONNX backend tests from %s: %zu cases, every one\n", Root().c_str(),
                AllCases().size());
    std::printf("onnx-node: %d passed, %d failed, %d skipped\n", Counts().passed, Counts().failed,
                Counts().skipped);
  }
};

}  // namespace

// A run that finds no data, or fewer cases than Debian's libonnx-testdata 1.12 holds (1,072
// directories), fails instead of passing with nothing checked. The floor is $KILN_ONNX_MIN_CASES
// when set (another data folder), else 1,072.
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
  const size_t floor = floor_env ? std::strtoul(floor_env, nullptr, 10) : 1072;
  if (AllCases().size() < floor) {
    std::fprintf(stderr,
                 "onnx-node: FAILED: %zu cases under %s, fewer than the floor of %zu "
                 "(KILN_ONNX_MIN_CASES); the data folder is incomplete\n",
                 AllCases().size(), Root().c_str(), floor);
    return 1;
  }
  testing::AddGlobalTestEnvironment(new Summary);
  return RUN_ALL_TESTS();
}
