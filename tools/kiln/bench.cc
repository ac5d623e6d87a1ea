// `kiln bench MODEL [--batch N] [--threads T] [--warmup W] [--iterations I] [--shape NAME=AxBxC]
// [--input NAME=FILE] [--json FILE] [--precision fp32|bf16] [--reference]`: measures load time,
// the cold first run (plan preparation included), then latency percentiles and throughput over
// timed runs on the same inputs. The JSON uses the key names of /work/shared/bench/ort_bench.js
// (ONNX Runtime's runner) so the two can be compared side by side (bench/compare does).
#include "bench.h"

#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_report.h"
#include "common.h"
#include "kiln/batcher.h"
#include "kiln/diagnostics.h"
#include "kiln/session.h"
#include "kiln/tensor_io.h"

#ifndef KILN_VERSION_STRING
#define KILN_VERSION_STRING "unknown"
#endif

namespace kiln::cli {
namespace {

// --profile: mean wall time per plan step over `runs` extra runs (after the timed ones, so the
// latency figures do not include the clock reads), by step and summed per kernel.
struct Profile {
  int runs = 0;
  double run_ms = 0;  // mean wall time of the profiled runs
  std::vector<NodeTime> steps;
  std::vector<RunTimings> traced;  // every profiled run, for --trace
};

StatusOr<Profile> ProfileRuns(Session& session, const std::vector<NamedTensor>& inputs, int runs,
                              bool keep_runs) {
  Profile p;
  p.runs = runs;
  RunTimings rt;
  rt.per_node = true;
  std::vector<NamedTensor> outputs;
  for (int i = 0; i < runs; ++i) {
    outputs.clear();
    const auto t = std::chrono::steady_clock::now();
    KILN_RETURN_IF_ERROR(session.Run(inputs, &outputs, &rt));
    p.run_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
    if (keep_runs) p.traced.push_back(rt);
    if (p.steps.empty()) {
      p.steps = rt.nodes;
      for (NodeTime& n : p.steps) n.ms = 0;
    }
    for (size_t k = 0; k < p.steps.size() && k < rt.nodes.size(); ++k)
      p.steps[k].ms += rt.nodes[k].ms;
  }
  p.run_ms /= runs;
  for (NodeTime& n : p.steps) n.ms /= runs;
  return p;
}

struct KernelTotal {
  std::string kernel;
  int steps = 0;
  double ms = 0;
};

std::vector<KernelTotal> ByKernel(const Profile& p) {
  std::vector<KernelTotal> out;
  for (const NodeTime& n : p.steps) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const KernelTotal& k) { return k.kernel == n.kernel; });
    if (it == out.end()) it = out.insert(out.end(), KernelTotal{n.kernel, 0, 0});
    ++it->steps;
    it->ms += n.ms;
  }
  std::sort(out.begin(), out.end(),
            [](const KernelTotal& a, const KernelTotal& b) { return a.ms > b.ms; });
  return out;
}

void PrintProfile(std::FILE* out, const Profile& p) {
  double sum = 0;
  for (const NodeTime& n : p.steps) sum += n.ms;
  std::fprintf(out,
               "\n=== Profile (--profile: %d more runs, mean ms per run; each step timed with a "
               "steady clock around its kernel) ===\n"
               "run %.3f ms = steps %.3f + outside kernels %.3f (input binding, output copies)\n",
               p.runs, p.run_ms, sum, p.run_ms - sum);
  std::fprintf(out, "by kernel:\n");
  for (const KernelTotal& k : ByKernel(p))
    std::fprintf(out, "  %8.3f ms %5.1f%%  %4d x %s\n", k.ms, sum > 0 ? 100.0 * k.ms / sum : 0.0,
                 k.steps, k.kernel.c_str());
  std::vector<const NodeTime*> top;
  for (const NodeTime& n : p.steps) top.push_back(&n);
  std::sort(top.begin(), top.end(),
            [](const NodeTime* a, const NodeTime* b) { return a->ms > b->ms; });
  if (top.size() > 15) top.resize(15);
  std::fprintf(out, "slowest steps:\n");
  for (const NodeTime* n : top)
    std::fprintf(out, "  %8.3f ms  %s '%s' (%s)\n", n->ms, n->op_type.c_str(), n->node.c_str(),
                 n->kernel.c_str());
}

std::string InputNames(const Session& session) {
  std::string names;
  for (const auto& in : session.inputs()) names += (names.empty() ? "" : ", ") + in.name;
  return names;
}

// Splits repeated NAME=VALUE options into a map, checking each name is a model input and given
// once. A bare VALUE (no '=') names the only input of a one-input model.
StatusOr<std::map<std::string, std::string>> ParseNamed(const Session& session,
                                                        const std::vector<std::string>& specs,
                                                        const char* flag, const char* what) {
  std::map<std::string, std::string> out;
  for (const std::string& spec : specs) {
    std::string name, value;
    auto eq = spec.find('=');
    if (eq == std::string::npos) {
      if (session.inputs().size() != 1)
        return InvalidArgument(std::string(flag) + " " + spec + ": the model has " +
                               std::to_string(session.inputs().size()) +
                               " inputs, so name it: " + flag + " NAME=" + what);
      name = session.inputs()[0].name;
      value = spec;
    } else {
      name = spec.substr(0, eq);
      value = spec.substr(eq + 1);
    }
    bool known = false;
    for (const auto& in : session.inputs()) known = known || in.name == name;
    if (!known)
      return InvalidArgument(std::string(flag) + " " + spec + ": unknown input '" + name +
                             "'; the model's inputs are: " + InputNames(session));
    if (!out.emplace(name, value).second)
      return InvalidArgument(std::string(flag) + ": input '" + name + "' given twice");
  }
  return out;
}

}  // namespace

// Deterministic pseudo-random contents: float32 in [-1, 1) from ort_bench.js's generator; integer
// inputs small non-negative values (0..3), bool alternating-ish bits.
StatusOr<Tensor> RandomTensor(const TensorSpec& spec, const Shape& shape) {
  uint32_t s = kInputSeed;
  auto next = [&s] {
    s = s * 1103515245u + 12345u;
    return s;
  };
  Tensor t = Tensor::Empty(spec.dtype, shape);
  const int64_t n = t.numel();
  switch (spec.dtype) {
    case DataType::kFloat: {
      float* p = t.data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(next() / 2147483648.0 - 1.0);
      break;
    }
    case DataType::kFloat16:
    case DataType::kBFloat16: {  // the same values as float32, rounded to the input's type
      TensorSpec f32 = spec;
      f32.dtype = DataType::kFloat;
      KILN_ASSIGN_OR_RETURN(Tensor f, RandomTensor(f32, shape));
      return ConvertFloatTensor(f, spec.dtype);
    }
    case DataType::kInt64: {
      int64_t* p = t.data<int64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = (next() >> 16) % 4;
      break;
    }
    case DataType::kInt32: {
      int32_t* p = t.data<int32_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>((next() >> 16) % 4);
      break;
    }
    case DataType::kUInt8: {
      uint8_t* p = t.data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>((next() >> 16) % 4);
      break;
    }
    case DataType::kInt8: {
      int8_t* p = t.data<int8_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int8_t>((next() >> 16) % 4);
      break;
    }
    case DataType::kBool: {
      bool* p = t.data<bool>();
      for (int64_t i = 0; i < n; ++i) p[i] = ((next() >> 16) & 1) != 0;
      break;
    }
    default:
      return Unsupported("input '" + spec.name + "' is " + spec.ToString() +
                         ": kiln bench generates only float32, float16, bfloat16, int32, int64, "
                         "int8, uint8 and bool "
                         "inputs; give this one with --input " +
                         spec.name + "=FILE");
  }
  return t;
}

// Whether --batch sizes this input: its first dim is symbolic (or its rank unknown). A scalar
// (Silero VAD's sample rate) or a fixed first dim (its state, [2,N,128]) has no batch dim.
bool BatchedInput(const TensorSpec& spec) {
  return !spec.rank_known || (!spec.dims.empty() && spec.dims[0] < 0);
}

// The concrete shape of a generated input: --shape if given (checked against the declared rank
// and fixed dims), else the declared dims with a symbolic first dim set to the batch. Any other
// symbolic dim is an error naming the input and the dim.
StatusOr<Shape> InputShape(const TensorSpec& spec, const std::map<std::string, std::string>& shapes,
                           const BenchArgs& a) {
  auto it = shapes.find(spec.name);
  if (it != shapes.end()) {
    KILN_ASSIGN_OR_RETURN(Shape s, ParseDims(spec.name, it->second));
    if (spec.rank_known) {
      if (s.size() != spec.dims.size())
        return InvalidArgument("--shape " + spec.name + "=" + it->second + ": input '" + spec.name +
                               "' is " + spec.ToString() + ", rank " +
                               std::to_string(spec.dims.size()) + ", got rank " +
                               std::to_string(s.size()));
      for (size_t i = 0; i < s.size(); ++i)
        if (spec.dims[i] >= 0 && spec.dims[i] != s[i])
          return InvalidArgument("--shape " + spec.name + "=" + it->second + ": dim " +
                                 std::to_string(i) + " of input '" + spec.name + "' is fixed to " +
                                 std::to_string(spec.dims[i]) + " (" + spec.ToString() + "), got " +
                                 std::to_string(s[i]));
    }
    if (a.batch_given && BatchedInput(spec) && !s.empty() && s[0] != a.batch)
      return InvalidArgument("--shape " + spec.name + "=" + it->second + " has first dim " +
                             std::to_string(s[0]) + " but --batch is " + std::to_string(a.batch) +
                             "; make them agree or leave one out");
    return s;
  }
  if (!spec.rank_known)
    return InvalidArgument("input '" + spec.name + "' declares no shape; give it with --shape " +
                           spec.name + "=AxBxC or --input " + spec.name + "=FILE");
  Shape s;
  for (size_t i = 0; i < spec.dims.size(); ++i) {
    if (spec.dims[i] >= 0) {
      if (i == 0 && a.batch_given && spec.dims[0] != a.batch)
        return InvalidArgument("--batch " + std::to_string(a.batch) + ": input '" + spec.name +
                               "' has a fixed first dim of " + std::to_string(spec.dims[0]) + " (" +
                               spec.ToString() + ")");
      s.push_back(spec.dims[i]);
    } else if (i == 0) {
      s.push_back(a.batch);
    } else {
      std::string sym = i < spec.dim_names.size() && !spec.dim_names[i].empty()
                            ? " ('" + spec.dim_names[i] + "')"
                            : "";
      return InvalidArgument("input '" + spec.name + "' (" + spec.ToString() + "): dim " +
                             std::to_string(i) + sym +
                             " is symbolic and only the first (batch) dim is set by --batch; give "
                             "the full shape with --shape " +
                             spec.name + "=AxBxC");
    }
  }
  return s;
}

// Same estimators as ort_bench.js: nearest-rank percentile on the sorted samples (index
// round(p/100*(n-1))), population standard deviation.
Stats ComputeStats(std::vector<double> t) {
  Stats st;
  if (t.empty()) return st;
  std::sort(t.begin(), t.end());
  auto q = [&](double p) {
    size_t i = static_cast<size_t>(std::lround(p / 100.0 * static_cast<double>(t.size() - 1)));
    return t[std::min(t.size() - 1, i)];
  };
  st.min = t.front();
  st.max = t.back();
  st.p50 = q(50);
  st.p90 = q(90);
  st.p99 = q(99);
  double sum = 0;
  for (double x : t) sum += x;
  st.mean = sum / static_cast<double>(t.size());
  double var = 0;
  for (double x : t) var += (x - st.mean) * (x - st.mean);
  st.std = std::sqrt(var / static_cast<double>(t.size()));
  return st;
}

double PeakRssMb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

SessionOptions OptionsOf(const BenchArgs& a) {
  SessionOptions opts;
  opts.reference_only = a.reference;
  opts.num_threads = a.threads;
  opts.precision = PrecisionArg(a.precision);
  opts.backend = BackendArg(a.device);
  opts.pinned_staging = a.pinned == "on";
  opts.cuda_graph = a.cuda_graph;
  opts.tune = a.tune;
  opts.plan_cache_dir = a.plan_cache;
  opts.disabled_passes = a.disabled_passes;
  return opts;
}

// The fields every --json report of the sweep and concurrency modes starts with.
nlohmann::ordered_json JsonHeader(const BenchArgs& a, int threads, const std::string& cpu_model) {
  nlohmann::ordered_json j;
  j["runtime"] = "kiln";
  j["version"] = KILN_VERSION_STRING;
  j["model"] = a.model;
  j["threads"] = threads;
  j["precision"] = a.precision;
  j["device"] = a.device;
  j["cpu_model"] = cpu_model;
  return j;
}

Status WriteJson(const std::string& path, const nlohmann::ordered_json& j, FILE* out) {
  return WriteJsonReport(path, j.dump(2) + "\n", out);
}

namespace {

double Mb(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// A sweep's document: to --json, and drawn to --report.
Status WriteResults(const BenchArgs& a, const nlohmann::ordered_json& j, FILE* out) {
  if (!a.report.empty()) {
    KILN_RETURN_IF_ERROR(WriteSweepReport(a.report, j));
    std::fprintf(out, "report: %s\n", a.report.c_str());
  }
  return a.json.empty() ? OkStatus() : WriteJson(a.json, j, out);
}

// --batch 1,2,4,...: one session, every batch in turn (random inputs), one line each, then what
// the session holds: packed weights shared by all plans, arenas, peak RSS. The latency-by-batch
// curve a dynamic batcher needs, and a check that serving many batch sizes costs little memory.
Status DoSweep(const BenchArgs& a) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  FILE* out = a.json == "-" ? stderr : stdout;
  if (!a.inputs.empty())
    return InvalidArgument("--batch with several sizes generates its inputs; drop --input");
  if (a.profile || !a.trace.empty())
    return InvalidArgument("--profile and --trace take one --batch size");
  auto t0 = Clock::now();
  KILN_ASSIGN_OR_RETURN(auto session, Session::Load(a.model, OptionsOf(a)));
  const double load_ms = ms(Clock::now() - t0);
  KILN_ASSIGN_OR_RETURN(auto shapes, ParseNamed(*session, a.shapes, "--shape", "AxBxC"));
  const CpuDescription& cpu = DescribeCpu();
  const int threads = a.threads > 0 ? a.threads : cpu.default_threads;
  std::fprintf(out, "kiln bench: %s, batches", a.model.c_str());
  for (int b : a.batches) std::fprintf(out, " %d", b);
  std::fprintf(out, " in one session; threads %d, precision %s, device %s; cpu %s\n", threads,
               a.precision.c_str(), a.device.c_str(), cpu.model.c_str());
  std::fprintf(out, "load %.1f ms\n%6s %12s %10s %10s %12s %12s\n", load_ms, "batch",
               "first run ms", "p50 ms", "p99 ms", "items/s", "arena MB");
  nlohmann::ordered_json sweep = nlohmann::ordered_json::array();
  for (int b : a.batches) {
    BenchArgs ab = a;
    ab.batch = b;
    ab.batch_given = true;
    std::vector<NamedTensor> inputs;
    for (const TensorSpec& spec : session->inputs()) {
      KILN_ASSIGN_OR_RETURN(Shape s, InputShape(spec, shapes, ab));
      KILN_ASSIGN_OR_RETURN(Tensor t, RandomTensor(spec, s));
      inputs.push_back({spec.name, std::move(t)});
    }
    const int warmup = a.warmup >= 0 ? a.warmup : (b == 1 ? 20 : 3);
    const int iterations = a.iterations >= 0 ? a.iterations : (b == 1 ? 100 : 10);
    std::vector<NamedTensor> outputs;
    auto t1 = Clock::now();
    KILN_RETURN_IF_ERROR(session->Run(inputs, &outputs));
    const double first_ms = ms(Clock::now() - t1);
    for (int i = 0; i < warmup; ++i) KILN_RETURN_IF_ERROR(session->Run(inputs, &outputs));
    std::vector<double> times;
    for (int i = 0; i < iterations; ++i) {
      auto t = Clock::now();
      KILN_RETURN_IF_ERROR(session->Run(inputs, &outputs));
      times.push_back(ms(Clock::now() - t));
    }
    const Stats st = ComputeStats(times);
    const double per_s = st.mean > 0 ? b * 1000.0 / st.mean : 0.0;
    const SessionStats ss = session->stats();
    std::fprintf(out, "%6d %12.2f %10.3f %10.3f %12.2f %12.1f\n", b, first_ms, st.p50, st.p99,
                 per_s, Mb(ss.arena_bytes));
    std::fflush(out);
    sweep.push_back(
        {{"batch", b},
         {"first_run_ms", first_ms},
         {"latency_ms", {{"min", st.min}, {"p50", st.p50}, {"p99", st.p99}, {"mean", st.mean}}},
         {"throughput_per_s", per_s},
         {"iterations", iterations},
         {"arena_bytes", ss.arena_bytes}});
  }
  const SessionStats ss = session->stats();
  const double rss = PeakRssMb();
  std::fprintf(out,
               "session: %zu plans; packed weights %.1f MB (%zu copies, %llu reused by later "
               "plans); arenas %.1f MB (%zu); largest plan arena %.1f MB\npeak RSS: %.1f MB\n",
               ss.plans, Mb(ss.packed_weight_bytes), ss.packed_weights,
               static_cast<unsigned long long>(ss.packed_weight_reuses), Mb(ss.arena_bytes),
               ss.arenas, Mb(ss.planned_arena_bytes_max), rss);
  if (a.json.empty() && a.report.empty()) return OkStatus();
  nlohmann::ordered_json j = JsonHeader(a, threads, cpu.model);
  j["load_ms"] = load_ms;
  j["sweep"] = sweep;
  j["plans"] = ss.plans;
  j["packed_weight_bytes"] = ss.packed_weight_bytes;
  j["packed_weight_reuses"] = ss.packed_weight_reuses;
  j["arena_bytes"] = ss.arena_bytes;
  j["largest_plan_arena_bytes"] = ss.planned_arena_bytes_max;
  j["peak_rss_mb"] = rss;
  return WriteResults(a, j, out);
}

// --overhead: one thread sends the same request alternately to Session::Run and to
// DynamicBatcher::Infer (the order swapped every pair), for --duration seconds per policy; the
// per-pair differences (batcher - direct) have a median that drift between minutes cannot move,
// since both halves of a pair run within a few milliseconds on the same thread and OpenMP pool.
// Two paths, the default policy both: Infer (an idle engine runs the request on the caller's
// thread: kiln bench --concurrency, an embedding program) and Submit (the request handed to the
// batcher's worker thread and its answer back: the path of kiln serve's requests).
Status MeasureOverhead(const BenchArgs& a, const Session& session,
                       const std::vector<NamedTensor>& request, FILE* out,
                       nlohmann::ordered_json* json) {
  using Clock = std::chrono::steady_clock;
  auto us = [](Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  std::fprintf(out,
               "batcher overhead at one client (pairs of direct Run and Infer on one thread, "
               "alternating):\n%12s %8s %12s %12s %14s %14s\n",
               "path", "pairs", "direct p50", "batcher p50", "overhead p50", "overhead p90");
  for (const bool inline_idle : {true, false}) {
    BatchPolicy policy;
    policy.max_batch = a.max_batch;
    policy.max_queue_delay_us = a.max_queue_delay_us;
    KILN_ASSIGN_OR_RETURN(auto batcher, DynamicBatcher::Create(session, policy));
    Status failed;
    std::vector<double> direct, batched, diff;
    std::thread client([&] {
      std::vector<NamedTensor> outputs;
      auto timed = [&](bool through_batcher, double* t) {
        const auto t0 = Clock::now();
        Status s;
        if (!through_batcher) {
          s = session.Run(request, &outputs);
        } else if (inline_idle) {
          s = batcher->Infer(request, &outputs);
        } else {
          std::promise<Status> answer;
          (void)batcher->Submit(request, [&](Status st, std::vector<NamedTensor> outs) {
            outputs = std::move(outs);
            answer.set_value(std::move(st));
          });
          s = answer.get_future().get();
        }
        *t = us(Clock::now() - t0);
        if (!s.ok() && failed.ok()) failed = s;
      };
      const auto warm_end = Clock::now() + std::chrono::milliseconds(500);
      const auto end =
          warm_end + std::chrono::microseconds(static_cast<int64_t>(a.duration_s * 1e6));
      for (size_t i = 0; failed.ok(); ++i) {
        const auto now = Clock::now();
        if (now >= end) break;
        double td = 0, tb = 0;
        if (i % 2 == 0) {
          timed(false, &td);
          timed(true, &tb);
        } else {
          timed(true, &tb);
          timed(false, &td);
        }
        if (now < warm_end) continue;
        direct.push_back(td);
        batched.push_back(tb);
        diff.push_back(tb - td);
      }
    });
    client.join();
    batcher->Shutdown();
    KILN_RETURN_IF_ERROR(failed);
    if (diff.empty()) return Internal("--overhead: no pair completed in --duration");
    const Stats sd = ComputeStats(direct), sb = ComputeStats(batched), so = ComputeStats(diff);
    const char* path = inline_idle ? "inline" : "hand-off";  // Infer / Submit
    std::fprintf(out, "%12s %8zu %9.1f us %9.1f us %11.1f us %11.1f us\n", path, diff.size(),
                 sd.p50, sb.p50, so.p50, so.p90);
    (*json)[path] = {{"pairs", diff.size()},
                     {"direct_p50_us", sd.p50},
                     {"batcher_p50_us", sb.p50},
                     {"overhead_p50_us", so.p50},
                     {"overhead_p90_us", so.p90}};
  }
  std::fflush(out);
  return OkStatus();
}

// --concurrency C,...: C client threads, each sending requests of --batch samples (default 1) one
// after another through one DynamicBatcher (kiln/batcher.h) in front of one session, whose plans
// for batch sizes 1..--max-batch are prepared first (as a server warms up). Per concurrency: 1 s
// of warm-up, then --duration seconds measured: requests and samples per second, request latency
// percentiles (submit to answer), the mean batch the batcher formed and the mean queue time.
Status DoConcurrency(const BenchArgs& a) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  FILE* out = a.json == "-" ? stderr : stdout;
  if (!a.inputs.empty()) return InvalidArgument("--concurrency generates its inputs; drop --input");
  // Loaded and prepared on a thread that ends (OnOwnThread: no idle OpenMP pool stays behind
  // to slow the clients' and the batcher's runs).
  KILN_ASSIGN_OR_RETURN(auto session,
                        OnOwnThread([&] { return Session::Load(a.model, OptionsOf(a)); }));
  KILN_ASSIGN_OR_RETURN(auto shapes, ParseNamed(*session, a.shapes, "--shape", "AxBxC"));
  const int samples = a.batch_given ? a.batch : 1;
  std::vector<NamedTensor> request;
  for (const TensorSpec& spec : session->inputs()) {
    BenchArgs ab = a;
    ab.batch = samples;
    ab.batch_given = true;
    KILN_ASSIGN_OR_RETURN(Shape s, InputShape(spec, shapes, ab));
    KILN_ASSIGN_OR_RETURN(Tensor t, RandomTensor(spec, s));
    request.push_back({spec.name, std::move(t)});
  }
  const auto t_prep = Clock::now();
  KILN_RETURN_IF_ERROR(OnOwnThread([&]() -> Status {
    for (int b = 1; b <= a.max_batch; ++b) {
      std::vector<std::pair<std::string, Shape>> prepare;
      for (const NamedTensor& in : request) {
        Shape s = in.tensor.shape();
        s[0] = b;
        prepare.push_back({in.name, s});
      }
      KILN_RETURN_IF_ERROR(session->Prepare(prepare));
    }
    return OkStatus();
  }));
  const double prep_ms = ms(Clock::now() - t_prep);
  const CpuDescription& cpu = DescribeCpu();
  const int threads = a.threads > 0 ? a.threads : cpu.default_threads;
  std::fprintf(
      out,
      "kiln bench: %s through the dynamic batcher; requests of %d sample(s), max batch %d, "
      "max queue delay %lld us; threads %d, device %s; cpu %s\n"
      "prepared batch sizes 1..%d in %.0f ms\n%11s %10s %10s %9s %9s %9s %10s %10s\n",
      a.model.c_str(), samples, a.max_batch, static_cast<long long>(a.max_queue_delay_us), threads,
      a.device.c_str(), cpu.model.c_str(), a.max_batch, prep_ms, "concurrency", "req/s", "items/s",
      "p50 ms", "p90 ms", "p99 ms", "mean batch", "queue ms");
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (int c : a.concurrency) {
    BatchPolicy policy;
    policy.max_batch = a.max_batch;
    policy.max_queue_delay_us = a.max_queue_delay_us;
    policy.max_queue = static_cast<size_t>(std::max(1024, 4 * c));
    KILN_ASSIGN_OR_RETURN(auto batcher, DynamicBatcher::Create(*session, policy));
    std::atomic<bool> stop{false};
    std::atomic<int> errors{0};
    // The measured window, as steady-clock ticks (read by the clients, set by this thread).
    std::atomic<Clock::rep> window_start{Clock::time_point::max().time_since_epoch().count()};
    std::atomic<Clock::rep> window_end{0};
    std::mutex mu;
    std::vector<double> latencies;
    std::vector<std::thread> clients;
    for (int k = 0; k < c; ++k)
      clients.emplace_back([&] {
        std::vector<NamedTensor> outputs;
        std::vector<double> mine;
        while (!stop.load(std::memory_order_relaxed)) {
          const auto t0 = Clock::now();
          if (!batcher->Infer(request, &outputs).ok()) ++errors;
          const auto t1 = Clock::now();
          if (t0.time_since_epoch().count() >= window_start.load() &&
              t1.time_since_epoch().count() <= window_end.load())
            mine.push_back(ms(t1 - t0));
        }
        std::lock_guard<std::mutex> lock(mu);
        latencies.insert(latencies.end(), mine.begin(), mine.end());
      });
    std::this_thread::sleep_for(std::chrono::seconds(1));  // warm-up
    const BatcherStats before = batcher->stats();
    const Clock::time_point end =
        Clock::now() + std::chrono::microseconds(static_cast<int64_t>(a.duration_s * 1e6));
    window_end = end.time_since_epoch().count();
    window_start = Clock::now().time_since_epoch().count();
    std::this_thread::sleep_until(end);
    const BatcherStats after = batcher->stats();
    stop = true;
    for (auto& t : clients) t.join();
    batcher->Shutdown();
    if (errors > 0) return Internal(std::to_string(errors.load()) + " requests failed");
    const double window_s = a.duration_s;
    const double reqs = static_cast<double>(latencies.size()) / window_s;
    const double batches = static_cast<double>(after.batches - before.batches);
    const double batched = static_cast<double>(after.batched_samples - before.batched_samples);
    const double items = batched / window_s;
    const double mean_batch = batches > 0 ? batched / batches : 0;
    const double served = static_cast<double>(after.requests - before.requests);
    const double queue_ms =
        served > 0 ? (after.queue_us_total - before.queue_us_total) / served / 1000.0 : 0;
    const Stats st = ComputeStats(latencies);
    std::fprintf(out, "%11d %10.1f %10.1f %9.2f %9.2f %9.2f %10.2f %10.2f\n", c, reqs, items,
                 st.p50, st.p90, st.p99, mean_batch, queue_ms);
    std::fflush(out);
    rows.push_back({{"concurrency", c},
                    {"requests_per_s", reqs},
                    {"throughput_per_s", items},
                    {"latency_ms", {{"p50", st.p50}, {"p90", st.p90}, {"p99", st.p99}}},
                    {"mean_batch", mean_batch},
                    {"mean_queue_ms", queue_ms}});
  }
  nlohmann::ordered_json overhead;
  if (a.overhead) KILN_RETURN_IF_ERROR(MeasureOverhead(a, *session, request, out, &overhead));
  std::fprintf(out, "peak RSS: %.1f MB\n", PeakRssMb());
  if (a.json.empty() && a.report.empty()) return OkStatus();
  nlohmann::ordered_json j = JsonHeader(a, threads, cpu.model);
  if (a.overhead) j["overhead"] = overhead;
  j["request_samples"] = samples;
  j["max_batch"] = a.max_batch;
  j["max_queue_delay_us"] = a.max_queue_delay_us;
  j["prepare_ms"] = prep_ms;
  j["concurrency"] = rows;
  j["peak_rss_mb"] = PeakRssMb();
  return WriteResults(a, j, out);
}

Status DoBench(BenchArgs a) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  FILE* out = a.json == "-" ? stderr : stdout;  // `--json -` keeps stdout for the JSON alone
  const CpuDescription& cpu = DescribeCpu();
  std::vector<std::string> cpu_isa;  // the extensions that matter for kiln's speed
  for (const char* f : {"avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8"})
    if (std::find(cpu.isa.begin(), cpu.isa.end(), f) != cpu.isa.end()) cpu_isa.push_back(f);
  const SessionOptions opts = OptionsOf(a);
  auto t0 = Clock::now();
  KILN_ASSIGN_OR_RETURN(auto session, Session::Load(a.model, opts));
  const double load_ms = ms(Clock::now() - t0);

  KILN_ASSIGN_OR_RETURN(auto shapes, ParseNamed(*session, a.shapes, "--shape", "AxBxC"));
  KILN_ASSIGN_OR_RETURN(auto files, ParseNamed(*session, a.inputs, "--input", "FILE"));
  for (const auto& [name, f] : files)
    if (shapes.count(name))
      return InvalidArgument("input '" + name + "' has both --shape and --input; give one");

  std::vector<NamedTensor> inputs;
  std::vector<std::string> origin;  // "random" or the file name, per input
  for (const TensorSpec& spec : session->inputs()) {
    auto f = files.find(spec.name);
    if (f != files.end()) {
      auto t = ReadTensorFile(f->second);
      if (!t.ok()) return Status(t.status()).AddContext("while reading input '" + spec.name + "'");
      if (a.batch_given && BatchedInput(spec) && (t->rank() == 0 || t->shape()[0] != a.batch))
        return InvalidArgument("--input " + spec.name + "=" + f->second + " is " +
                               DataTypeName(t->dtype()) + ShapeToString(t->shape()) +
                               " but --batch is " + std::to_string(a.batch) +
                               "; make them agree or leave --batch out");
      inputs.push_back({spec.name, std::move(t).value()});
      origin.push_back(f->second);
    } else {
      KILN_ASSIGN_OR_RETURN(Shape s, InputShape(spec, shapes, a));
      KILN_ASSIGN_OR_RETURN(Tensor t, RandomTensor(spec, s));
      inputs.push_back({spec.name, std::move(t)});
      origin.push_back("random, seed " + std::to_string(kInputSeed));
    }
  }
  // The batch the throughput is counted in: the first dim of the first input.
  int64_t batch = a.batch;
  if (!inputs.empty() && inputs[0].tensor.rank() > 0) batch = inputs[0].tensor.shape()[0];
  const int warmup = a.warmup >= 0 ? a.warmup : (batch == 1 ? 20 : 3);
  const int iterations = a.iterations >= 0 ? a.iterations : (batch == 1 ? 100 : 10);
  const int threads = a.threads > 0 ? a.threads : cpu.default_threads;

  std::fprintf(out, "kiln bench: %s\n", a.model.c_str());
  for (size_t i = 0; i < inputs.size(); ++i)
    std::fprintf(out, "  input %s: %s%s (%s)\n", inputs[i].name.c_str(),
                 DataTypeName(inputs[i].tensor.dtype()),
                 ShapeToString(inputs[i].tensor.shape()).c_str(), origin[i].c_str());
  std::fprintf(out, "  batch %lld, threads %d%s, precision %s, kernels: %s\n",
               static_cast<long long>(batch), threads,
               a.threads > 0 ? "" : " (= physical cores, --threads 0)", a.precision.c_str(),
               a.reference ? "reference only (--reference)" : "default selection");
  std::string isa;
  for (const auto& f : cpu_isa) isa += " " + f;
  std::fprintf(out, "  cpu: %s, %d physical cores, %d logical CPUs; ISA:%s\n", cpu.model.c_str(),
               cpu.physical_cores, cpu.logical_cpus,
               isa.empty() ? " (none of interest)" : isa.c_str());
  std::fprintf(out, "  kiln %s, oneDNN %s\n", KILN_VERSION_STRING, cpu.onednn_version.c_str());
  for (const std::string& pass : a.disabled_passes)
    std::fprintf(out, "  pass %s disabled (--disable-pass)\n", pass.c_str());
  if (a.precision == "bf16" &&
      std::none_of(cpu_isa.begin(), cpu_isa.end(),
                   [](const std::string& f) { return f == "avx512_bf16" || f == "amx_bf16"; }))
    std::fprintf(out, "  note: this CPU reports no avx512_bf16/amx_bf16; bf16 may be emulated\n");
  std::fprintf(out, "running: 1 first run, %d warm-up runs, %d timed runs ...\n", warmup,
               iterations);
  std::fflush(out);

  std::vector<NamedTensor> outputs;
  auto t1 = Clock::now();
  KILN_RETURN_IF_ERROR(session->Run(inputs, &outputs));
  const double first_run_ms = ms(Clock::now() - t1);
  for (int i = 0; i < warmup; ++i) {
    outputs.clear();
    KILN_RETURN_IF_ERROR(session->Run(inputs, &outputs));
  }
  std::vector<double> times, upload_ms, compute_ms, download_ms;
  times.reserve(static_cast<size_t>(iterations));
  for (auto* v : {&upload_ms, &compute_ms, &download_ms}) v->reserve(times.capacity());
  RunTimings rt;
  for (int i = 0; i < iterations; ++i) {
    outputs.clear();
    auto t = Clock::now();
    KILN_RETURN_IF_ERROR(session->Run(inputs, &outputs, &rt));
    times.push_back(ms(Clock::now() - t));
    upload_ms.push_back(rt.upload_ms);
    compute_ms.push_back(rt.compute_ms);
    download_ms.push_back(rt.download_ms);
  }
  Profile profile;
  if ((a.profile || !a.trace.empty()) && !rt.device) {
    KILN_ASSIGN_OR_RETURN(profile, ProfileRuns(*session, inputs, iterations, !a.trace.empty()));
    if (!a.trace.empty()) {
      std::ofstream f(a.trace);
      f << ChromeTraceJson(profile.traced, "kiln bench " + a.model);
      if (!f.good()) return InvalidArgument("cannot write --trace file '" + a.trace + "'");
      std::fprintf(stderr,
                   "trace: %d runs, %zu steps each, written to %s (open in "
                   "ui.perfetto.dev or chrome://tracing)\n",
                   profile.runs, profile.steps.size(), a.trace.c_str());
    }
  }
  const Stats st = ComputeStats(times);
  const double throughput = st.mean > 0 ? static_cast<double>(batch) * 1000.0 / st.mean : 0.0;
  const double rss_mb = PeakRssMb();

  std::fprintf(out, "\n=== Results ===\n");
  std::fprintf(out,
               "load:        %10.2f ms   Session::Load: read and check the model, run graph "
               "passes\n",
               load_ms);
  std::fprintf(out,
               "first run:   %10.2f ms   the cold first Run(): includes plan preparation "
               "(shape inference,\n"
               "                             constant folding, kernel selection) and one "
               "execution\n",
               first_run_ms);
  if (a.tune && !a.plan_cache.empty())
    std::fprintf(out, "plan cache:  %s (%s); a hit skips --tune's timing in the first run\n",
                 session->plan_cache_status().c_str(), a.plan_cache.c_str());
  std::fprintf(out,
               "warm-up:     %10d runs  run after the first, not timed (caches, allocator, "
               "thread pool)\n",
               warmup);
  std::fprintf(out,
               "latency over %d timed runs (ms; wall-clock of one Run() call, inputs "
               "in memory, outputs\nallocated by kiln, one request in flight):\n",
               iterations);
  std::fprintf(out, "  min %.3f   p50 %.3f   p90 %.3f   p99 %.3f   max %.3f\n", st.min, st.p50,
               st.p90, st.p99, st.max);
  std::fprintf(out,
               "  mean %.3f   std %.3f   (p50: the median; p99 needs >= 100 runs to mean "
               "much)\n",
               st.mean, st.std);
  std::fprintf(out, "throughput:  %10.2f items/s  = batch %lld * 1000 / mean latency\n", throughput,
               static_cast<long long>(batch));
  std::fprintf(out,
               "peak RSS:    %10.1f MB   maximum resident memory of this process "
               "(getrusage ru_maxrss)\n",
               rss_mb);
  const Stats up = ComputeStats(upload_ms), comp = ComputeStats(compute_ms),
              down = ComputeStats(download_ms);
  if (rt.device) {
    std::fprintf(out, "device:      %s, staging %s%s\n", session->device_description().c_str(),
                 a.pinned == "on" ? "page-locked (--pinned on)" : "pageable (--pinned off)",
                 a.cuda_graph ? ", CUDA graph replay (--cuda-graph; captured in warm-up)" : "");
    std::fprintf(out,
                 "device split (CUDA events, p50 ms): upload %.3f   compute %.3f   download "
                 "%.3f\n  upload: host -> page-locked staging -> device; download: the reverse\n",
                 up.p50, comp.p50, down.p50);
    const DeviceStartup cs = session->device_startup();
    std::fprintf(out,
                 "cold start (inside load): plugin + cuDNN/cuBLAS %.1f ms, driver %.1f ms, "
                 "context %.1f ms,\n  kernel modules %.1f ms (%d, %s sm_%d)\n",
                 cs.plugin_load_ms, cs.driver_init_ms, cs.context_ms, cs.module_load_ms, cs.modules,
                 cs.ptx_jit ? "PTX JIT-compiled for" : "SASS for", cs.kernel_arch);
  }
  if (a.profile && rt.device)
    std::fprintf(out, "profile:     per-step times are measured on the CPU backend only\n");
  if (profile.runs > 0) PrintProfile(out, profile);
  if (iterations > 1 && st.mean > 0 && st.std / st.mean > 0.1)
    std::fprintf(out,
                 "note: std is %.0f%% of the mean: the machine is noisy or the run too "
                 "short; use more --iterations\n",
                 100.0 * st.std / st.mean);

  if (!a.json.empty()) {
    nlohmann::ordered_json j;
    j["runtime"] = "kiln";
    j["version"] = KILN_VERSION_STRING;
    j["model"] = a.model;
    j["batch"] = batch;
    j["threads"] = threads;
    j["threads_requested"] = a.threads;
    j["warmup"] = warmup;
    j["iterations"] = iterations;
    j["load_ms"] = load_ms;
    j["first_run_ms"] = first_run_ms;
    j["latency_ms"] = {{"min", st.min}, {"p50", st.p50},   {"p90", st.p90}, {"p99", st.p99},
                       {"max", st.max}, {"mean", st.mean}, {"std", st.std}};
    j["throughput_per_s"] = throughput;
    j["precision"] = a.precision;
    j["reference"] = a.reference;
    j["disabled_passes"] = a.disabled_passes;
    j["tune"] = a.tune;
    j["plan_cache"] = session->plan_cache_status();
    j["device"] = a.device;
    if (rt.device) {
      j["device_name"] = session->device_description();
      j["pinned"] = a.pinned == "on";
      j["cuda_graph"] = a.cuda_graph;
      j["device_split_ms_p50"] = {
          {"upload", up.p50}, {"compute", comp.p50}, {"download", down.p50}};
      const DeviceStartup cs = session->device_startup();
      j["cold_start"] = {{"plugin_load_ms", cs.plugin_load_ms},
                         {"driver_init_ms", cs.driver_init_ms},
                         {"context_ms", cs.context_ms},
                         {"module_load_ms", cs.module_load_ms},
                         {"modules", cs.modules},
                         {"ptx_jit", cs.ptx_jit},
                         {"kernel_arch", cs.kernel_arch}};
    }
    j["kiln_version"] = KILN_VERSION_STRING;
    j["onednn_version"] = cpu.onednn_version;
    j["cpu_model"] = cpu.model;
    j["cpu_isa"] = cpu_isa;
    j["physical_cores"] = cpu.physical_cores;
    j["rss_mb"] = rss_mb;
    nlohmann::ordered_json ins = nlohmann::ordered_json::array();
    for (size_t i = 0; i < inputs.size(); ++i)
      ins.push_back({{"name", inputs[i].name},
                     {"dtype", DataTypeName(inputs[i].tensor.dtype())},
                     {"shape", inputs[i].tensor.shape()},
                     {"source", origin[i]}});
    j["inputs"] = ins;
    j["times_ms"] = times;
    if (profile.runs > 0) {
      nlohmann::ordered_json steps = nlohmann::ordered_json::array(),
                             kernels = nlohmann::ordered_json::array();
      for (const NodeTime& n : profile.steps)
        steps.push_back(
            {{"node", n.node}, {"op_type", n.op_type}, {"kernel", n.kernel}, {"ms", n.ms}});
      for (const KernelTotal& k : ByKernel(profile))
        kernels.push_back({{"kernel", k.kernel}, {"steps", k.steps}, {"ms", k.ms}});
      j["profile"] = {{"runs", profile.runs},
                      {"run_ms", profile.run_ms},
                      {"by_kernel", kernels},
                      {"steps", steps}};
    }
    return WriteJson(a.json, j, out);
  }
  return OkStatus();
}

}  // namespace

void AddBenchCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure load time, first-run time, latency percentiles and throughput");
  cmd->add_option("model", args->model, "ONNX model file (with --url: the served model's name)")
      ->required();
  CLI::Option* batch =
      cmd->add_option("--batch,-b", args->batches,
                      "Batch: the size of a symbolic first input dim (default 1); several "
                      "(1,2,4,8) bench each in one session")
          ->delimiter(',')
          ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--threads,-t", args->threads, "Threads; 0 (default) = physical cores")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--warmup,-w", args->warmup,
                  "Untimed runs after the first (default 20 at batch 1, else 3)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--iterations,-n", args->iterations,
                  "Timed runs (default 100 at batch 1, else 10)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--shape", args->shapes,
                  "NAME=AxBxC: full shape of a generated input (repeatable); needed for symbolic "
                  "dims other than the first");
  cmd->add_option("--input,-i", args->inputs,
                  "NAME=FILE (.npy or .pb): use this tensor instead of random values (repeatable)");
  cmd->add_option("--json", args->json, "Write the results as JSON to FILE ('-': stdout)");
  cmd->add_option("--device,-d", args->device, "Backend: cpu (default) or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_flag("--profile", args->profile,
                "After the timed runs, as many more with per-step timing: mean ms per kernel and "
                "the slowest steps (CPU backend)");
  cmd->add_option("--report", args->report,
                  "With several --batch sizes or --concurrency: write the sweep as a "
                  "self-contained HTML page (SVG charts of latency with its spread and "
                  "throughput, and a table)");
  cmd->add_option("--trace", args->trace,
                  "After the timed runs, as many more with per-step timing, written to FILE as "
                  "Chrome/Perfetto trace JSON (one slice per kernel; CPU backend)");
  cmd->add_flag("--tune", args->tune,
                "Time alternative kernels per shape at the first run and keep the fastest");
  cmd->add_option("--plan-cache", args->plan_cache,
                  "With --tune: reuse (and store) the measured choices in this folder");
  cmd->add_flag("--cuda-graph", args->cuda_graph,
                "Capture the second run as a CUDA graph and replay it (--device cuda)");
  cmd->add_option("--pinned", args->pinned,
                  "Device staging: on (page-locked, default) or off (pageable), to compare")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--precision", args->precision,
                  "fp32 (default); bf16 on the CPU (AVX512-BF16/AMX); fp16 on --device cuda")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_flag("--reference", args->reference, "Use only the reference kernels");
  cmd->add_option("--disable-pass", args->disabled_passes,
                  "Skip this optimizer pass (repeatable; names in `kiln inspect --optimized`), to "
                  "measure what it gives");
  CLI::Option* concurrency =
      cmd->add_option("--concurrency", args->concurrency,
                      "In-process clients through the dynamic batcher, e.g. 1,8,32,64 (each "
                      "sends requests of --batch samples, default 1)")
          ->delimiter(',')
          ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-batch", args->max_batch, "With --concurrency: the batcher's max batch")
      ->check(CLI::Range(1, 4096))
      ->needs(concurrency);
  cmd->add_option("--max-queue-delay-us", args->max_queue_delay_us,
                  "With --concurrency: the longest a request waits for company when the engine "
                  "is busy (default 500)")
      ->check(CLI::Range(0, 60000000))
      ->needs(concurrency);
  cmd->add_flag("--overhead", args->overhead,
                "With --concurrency: also measure the batcher's per-request cost at one client, "
                "paired with direct runs on the same thread (medians of per-pair differences)")
      ->needs(concurrency);
  cmd->add_option("--duration", args->duration_s,
                  "With --concurrency or --rate: seconds measured per step (default 5)")
      ->check(CLI::Range(0.1, 3600.0));
  CLI::Option* url =
      cmd->add_option("--url", args->url,
                      "Drive a running server (kiln serve, Triton): http://HOST:PORT or "
                      "grpc://HOST:PORT, with --concurrency or --rate");
  cmd->add_option("--rate", args->rates,
                  "With --url: Poisson arrivals at these request rates (req/s), e.g. 100,200")
      ->delimiter(',')
      ->check(CLI::Range(0.1, 1e6))
      ->needs(url);
  cmd->add_option("--tensor-format", args->tensor_format,
                  "With an http:// --url: binary (default) or json tensors")
      ->check(CLI::IsMember({"binary", "json"}))
      ->needs(url);
  cmd->add_option("--max-inflight", args->max_inflight,
                  "With --rate: requests in flight at most (default 512)")
      ->check(CLI::Range(1, 4096))
      ->needs(url);
  cmd->add_option("--request-timeout-ms", args->timeout_ms,
                  "With --url: give up on a request after this long (default 60000)")
      ->check(CLI::Range(int64_t{1}, int64_t{3600000}))
      ->needs(url);
  cmd->callback([args, batch, exit_code] {
    args->batch_given = batch->count() > 0;
    args->batch = args->batches.empty() ? 1 : args->batches.front();
    if (!args->concurrency.empty() && args->batches.size() > 1)
      throw CLI::ValidationError("--concurrency", "takes one --batch (the samples per request)");
    if (!args->url.empty() && args->concurrency.empty() == args->rates.empty())
      throw CLI::ValidationError("--url", "needs one of --concurrency or --rate");
    if (!args->report.empty() &&
        (!args->url.empty() || (args->concurrency.empty() && args->batches.size() < 2)))
      throw CLI::ValidationError("--report",
                                 "draws a sweep: give several --batch sizes or --concurrency "
                                 "(in process)");
    Status s = !args->url.empty()           ? DoClient(*args)
               : !args->concurrency.empty() ? DoConcurrency(*args)
               : args->batches.size() > 1   ? DoSweep(*args)
                                            : DoBench(*args);
    if (!s.ok()) *exit_code = Fail(s);
  });
}

}  // namespace kiln::cli
