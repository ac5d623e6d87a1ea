// What `kiln bench`'s modes share: the arguments, generated inputs, latency statistics and the
// JSON report's header. bench.cc holds the offline modes; bench_client.cc drives a server.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/session.h"
#include "kiln/status.h"

namespace kiln::cli {

// Seed of the generated inputs; the same generator and seed as ort_bench.js, so a float32 input
// holds identical values in both runners.
constexpr uint32_t kInputSeed = 12345;

struct BenchArgs {
  std::string model;
  std::vector<int> batches = {1};  // --batch 1,2,4: a sweep in one session (DoSweep)
  int batch = 1;
  bool batch_given = false;
  int threads = 0;
  int warmup = -1;      // -1: 20 at batch 1, else 3 (ort_bench.js's defaults)
  int iterations = -1;  // -1: 100 at batch 1, else 10
  std::vector<std::string> shapes;
  std::vector<std::string> inputs;
  std::string json;
  std::string precision = "fp32";
  std::string device = "cpu";
  std::string pinned = "on";
  bool cuda_graph = false;
  bool tune = false;
  std::string plan_cache;
  bool reference = false;
  std::vector<std::string> disabled_passes;  // --disable-pass NAME (repeatable)
  bool profile = false;
  std::string trace;  // --trace FILE: Chrome/Perfetto trace JSON of the profiled runs
  std::string report;  // --report FILE: the sweep as an HTML page (bench_report.h)
  // --concurrency 1,8,32,64: in-process clients through the dynamic batcher (DoConcurrency).
  std::vector<int> concurrency;
  int max_batch = 32;
  int64_t max_queue_delay_us = 500;
  double duration_s = 5;
  // --overhead (with --concurrency): the batcher's own cost at one client, paired with direct
  // Session::Run calls on the same thread (MeasureOverhead).
  bool overhead = false;
  // --url http://HOST:PORT | grpc://HOST:PORT: drive a running server (DoClient); `model` is then
  // the served model's name.
  std::string url;
  std::vector<double> rates;  // --rate R,...: Poisson arrivals (req/s) instead of clients
  std::string tensor_format = "binary";  // HTTP: binary or json
  int max_inflight = 512;                // --rate: requests in flight at most (client threads)
  int64_t timeout_ms = 60000;            // per request
};

struct Stats {
  double min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0, std = 0;
};

// Same estimators as ort_bench.js: nearest-rank percentile on the sorted samples (index
// round(p/100*(n-1))), population standard deviation.
Stats ComputeStats(std::vector<double> t);
// Random values (seed kInputSeed) of the spec's dtype in `shape`.
StatusOr<Tensor> RandomTensor(const TensorSpec& spec, const Shape& shape);
// The concrete shape of a generated input: --shape if given (checked against the declared rank
// and fixed dims), else the declared dims with a symbolic first dim set to the batch.
StatusOr<Shape> InputShape(const TensorSpec& spec, const std::map<std::string, std::string>& shapes,
                           const BenchArgs& a);
double PeakRssMb();
// The fields every --json report of the sweep and concurrency modes starts with.
nlohmann::ordered_json JsonHeader(const BenchArgs& a, int threads, const std::string& cpu_model);
Status WriteJson(const std::string& path, const nlohmann::ordered_json& j, FILE* out);
// --url: clients against a running server (bench_client.cc).
Status DoClient(const BenchArgs& a);

}  // namespace kiln::cli
