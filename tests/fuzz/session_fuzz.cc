// libFuzzer target for a whole session on an untrusted model: protobuf bytes in, through
// Session::LoadFromBytes (parsing, node checks, float16 lowering, the default optimizer passes)
// and then, when every input has a declared rank, Session::Prepare with each input's declared
// shape (symbolic dims taken as 1: shape inference, constant folding, kernel selection and
// preparation, memory planning), and a run on zeros with a deadline when the inputs are small.
// The loader fuzzer (loader_fuzz.cc) stops before all of that. Any Status is fine; a crash, a
// sanitizer report, a hang (libFuzzer's -timeout), an RSS past the limit or an escaping exception
// is a bug. Built by the `fuzz` preset; run by scripts/fuzz.sh over tests/fuzz/corpus.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/session.h"

namespace {

// Inputs larger than this are prepared but not run: a run is for reaching the kernels with the
// fuzzed attributes, not for measuring them.
constexpr int64_t kMaxRunElements = 1 << 14;
constexpr size_t kMaxRunArenaBytes = size_t{4} << 20;
// Declared dims past this are not prepared (a legitimate model may ask for any size; the fuzzer
// is after crashes, not allocation failures of honest huge inputs).
constexpr int64_t kMaxDim = 1 << 12;
constexpr int64_t kMaxElements = 1 << 18;

// The largest element count among the "[d0,d1,...]" shapes of a plan's text (saturating at 2^40).
int64_t LargestShape(const std::string& text) {
  constexpr int64_t kCap = int64_t{1} << 40;
  auto times = [](int64_t a, int64_t b) { return b > 0 && a > kCap / b ? kCap : a * b; };
  int64_t largest = 0;
  for (size_t at = text.find('['); at != std::string::npos; at = text.find('[', at + 1)) {
    int64_t n = 1, d = 0;
    size_t i = at + 1;
    for (; i < text.size(); ++i) {
      const char c = text[i];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        d = std::min(kCap, d * 10 + (c - '0'));
      } else if (c == ',') {
        n = times(n, d);
        d = 0;
      } else {
        break;
      }
    }
    if (i < text.size() && text[i] == ']' && i > at + 1) largest = std::max(largest, times(n, d));
  }
  return largest;
}

void RequireMessage(const kiln::Status& s) {
  if (!s.ok() && s.message().empty()) __builtin_trap();  // every failure says something
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  kiln::SessionOptions options;
  options.num_threads = 1;
  auto session = kiln::Session::LoadFromBytes(bytes, options);
  if (!session.ok()) {
    RequireMessage(session.status());
    return 0;
  }
  std::vector<std::pair<std::string, kiln::Shape>> shapes;
  std::vector<kiln::NamedTensor> feeds;
  int64_t run_elements = 0;
  for (const kiln::TensorSpec& in : (*session)->inputs()) {
    if (!in.rank_known) return 0;
    kiln::Shape shape;
    int64_t elements = 1;
    for (int64_t d : in.dims) {
      const int64_t dim = d < 0 ? 1 : d;
      if (dim > kMaxDim) return 0;
      elements *= dim;
      if (elements > kMaxElements) return 0;
      shape.push_back(dim);
    }
    run_elements += elements;
    shapes.emplace_back(in.name, shape);
    if (kiln::DataTypeSize(in.dtype) == 0) continue;
    feeds.push_back({in.name, kiln::Tensor::Empty(in.dtype, shape)});  // zero-filled
  }
  const kiln::Status prepared = (*session)->Prepare(shapes);
  RequireMessage(prepared);
  if (!prepared.ok() || feeds.size() != shapes.size() || run_elements > kMaxRunElements) return 0;
  // Nor is a plan with a large tensor: one kernel is not interrupted by the deadline, so an honest
  // Resize to [1,6,6,524292] (an output, outside the arena) would only time out under ASan, not
  // find a bug. The plan's text lists every step's output shape ("float32[1,6,6,524292]").
  auto plan = (*session)->DescribePlanSummary(feeds);
  RequireMessage(plan.status());
  if (!plan.ok() || plan->arena_bytes > kMaxRunArenaBytes ||
      LargestShape(plan->text) > kMaxRunElements * 16)
    return 0;
  kiln::RunOptions run;
  run.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  std::vector<kiln::NamedTensor> outputs;
  RequireMessage((*session)->Run(feeds, &outputs, run));
  return 0;
}
