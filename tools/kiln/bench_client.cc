// `kiln bench NAME --url http://HOST:PORT|grpc://HOST:PORT (--concurrency C,... | --rate R,...)`:
// drives a running KServe v2 server (kiln serve, Triton) the way perf_analyzer does.
//   --concurrency: C client threads, each with its own connection, each sending its next request
//     when the last is answered; 1 s of warm-up, then --duration seconds measured (requests
//     answered within it).
//   --rate: requests arrive as a Poisson process at R req/s (seeded), handed to up to
//     --max-inflight client threads; a request's latency counts from its scheduled arrival, so a
//     client that falls behind shows as latency, not as a lower offered load.
// Per step: answered and refused (queue full, draining) requests per second, latency percentiles
// of the answered ones, the p99 of the time to a refusal, requests dropped at the server's queue
// timeout (expired) per second, and other failures by kind.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "bench.h"
#include "common.h"
#include "kiln/client.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// What one step saw; filled by the client threads under `mu`.
struct Tally {
  std::mutex mu;
  std::vector<double> ok_ms;
  std::vector<double> refused_ms;          // Unavailable: queue full or shutting down
  std::vector<double> expired_ms;          // DeadlineExceeded: dropped at the queue timeout
  std::map<std::string, uint64_t> failed;  // other outcomes, by status code
  std::string first_failure;
  void Add(const Status& s, double ms) {
    std::lock_guard<std::mutex> lock(mu);
    if (s.ok()) {
      ok_ms.push_back(ms);
    } else if (s.code() == StatusCode::kUnavailable) {
      refused_ms.push_back(ms);
    } else if (s.code() == StatusCode::kDeadlineExceeded) {
      expired_ms.push_back(ms);
    } else {
      ++failed[StatusCodeName(s.code())];
      if (first_failure.empty()) first_failure = s.ToString();
    }
  }
};

StatusOr<std::vector<NamedTensor>> MakeRequest(const BenchArgs& a, ClientOptions opts) {
  KILN_ASSIGN_OR_RETURN(auto client, InferenceClient::Create(a.url, opts));
  KILN_ASSIGN_OR_RETURN(std::vector<TensorSpec> specs, client->ModelInputs(a.model));
  std::map<std::string, std::string> shapes;
  for (const std::string& s : a.shapes) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos) return InvalidArgument("--shape " + s + ": expected NAME=AxBxC");
    shapes[s.substr(0, eq)] = s.substr(eq + 1);
  }
  BenchArgs ab = a;
  ab.batch = a.batch_given ? a.batch : 1;
  ab.batch_given = true;
  std::vector<NamedTensor> request;
  for (const TensorSpec& spec : specs) {
    KILN_ASSIGN_OR_RETURN(Shape s, InputShape(spec, shapes, ab));
    KILN_ASSIGN_OR_RETURN(Tensor t, RandomTensor(spec, s));
    request.push_back({spec.name, std::move(t)});
  }
  return request;
}

nlohmann::ordered_json Row(Tally& t, double window_s, int samples, FILE* out, const char* label,
                           double value) {
  std::lock_guard<std::mutex> lock(t.mu);
  const Stats ok = ComputeStats(t.ok_ms);
  const Stats refused = ComputeStats(t.refused_ms);
  uint64_t failed = 0;
  for (const auto& [k, n] : t.failed) failed += n;
  const double ok_per_s = static_cast<double>(t.ok_ms.size()) / window_s;
  const double refused_per_s = static_cast<double>(t.refused_ms.size()) / window_s;
  const double expired_per_s = static_cast<double>(t.expired_ms.size()) / window_s;
  std::fprintf(out, "%11g %10.1f %10.1f %9.2f %9.2f %9.2f %10.1f %11.2f %10.1f %7llu\n", value,
               ok_per_s, ok_per_s * samples, ok.p50, ok.p90, ok.p99, refused_per_s, refused.p99,
               expired_per_s, static_cast<unsigned long long>(failed));
  if (!t.first_failure.empty()) std::fprintf(out, "  first failure: %s\n", t.first_failure.c_str());
  std::fflush(out);
  nlohmann::ordered_json failures = nlohmann::ordered_json::object();
  for (const auto& [k, n] : t.failed) failures[k] = n;
  return {{label, value},
          {"requests_per_s", ok_per_s},
          {"throughput_per_s", ok_per_s * samples},
          {"latency_ms", {{"p50", ok.p50}, {"p90", ok.p90}, {"p99", ok.p99}}},
          {"refused_per_s", refused_per_s},
          {"refused_latency_ms", {{"p50", refused.p50}, {"p99", refused.p99}}},
          {"expired_per_s", expired_per_s},
          {"failed", failures}};
}

// --concurrency: c threads in a closed loop.
StatusOr<nlohmann::ordered_json> RunConcurrency(const BenchArgs& a, ClientOptions opts,
                                                const std::vector<NamedTensor>& request, int c,
                                                int samples, FILE* out) {
  std::vector<std::unique_ptr<InferenceClient>> clients;
  for (int k = 0; k < c; ++k) {
    KILN_ASSIGN_OR_RETURN(auto client, InferenceClient::Create(a.url, opts));
    clients.push_back(std::move(client));
  }
  Tally tally;
  std::atomic<bool> stop{false};
  std::atomic<Clock::rep> window_start{Clock::time_point::max().time_since_epoch().count()};
  std::atomic<Clock::rep> window_end{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < c; ++k)
    threads.emplace_back([&, k] {
      std::vector<NamedTensor> outputs;
      while (!stop.load(std::memory_order_relaxed)) {
        const auto t0 = Clock::now();
        const Status s = clients[k]->Infer(a.model, request, &outputs);
        const auto t1 = Clock::now();
        // Counted by completion time: with latencies near the window's length, counting only
        // requests that also started inside it would undercount throughput.
        if (t1.time_since_epoch().count() >= window_start.load() &&
            t1.time_since_epoch().count() <= window_end.load())
          tally.Add(s, Ms(t1 - t0));
      }
    });
  std::this_thread::sleep_for(std::chrono::seconds(1));  // warm-up
  const Clock::time_point end =
      Clock::now() + std::chrono::microseconds(static_cast<int64_t>(a.duration_s * 1e6));
  window_end = end.time_since_epoch().count();
  window_start = Clock::now().time_since_epoch().count();
  std::this_thread::sleep_until(end);
  stop = true;
  for (auto& t : threads) t.join();
  return Row(tally, a.duration_s, samples, out, "concurrency", c);
}

// --rate: Poisson arrivals handed to a pool of client threads.
StatusOr<nlohmann::ordered_json> RunRate(const BenchArgs& a, ClientOptions opts,
                                         const std::vector<NamedTensor>& request, double rate,
                                         int samples, FILE* out) {
  const int workers = a.max_inflight;
  std::vector<std::unique_ptr<InferenceClient>> clients;
  for (int k = 0; k < workers; ++k) {
    KILN_ASSIGN_OR_RETURN(auto client, InferenceClient::Create(a.url, opts));
    clients.push_back(std::move(client));
  }
  Tally tally;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Clock::time_point> due;  // scheduled arrivals not yet taken by a thread
  bool done = false;
  std::atomic<uint64_t> late{0};  // started over 1 ms after their arrival: every thread was busy
  std::vector<std::thread> threads;
  for (int k = 0; k < workers; ++k)
    threads.emplace_back([&, k] {
      std::vector<NamedTensor> outputs;
      for (;;) {
        Clock::time_point at;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return done || !due.empty(); });
          if (due.empty()) return;
          at = due.front();
          due.pop_front();
        }
        std::this_thread::sleep_until(at);
        if (Clock::now() - at > std::chrono::milliseconds(1)) ++late;
        const Status s = clients[k]->Infer(a.model, request, &outputs);
        tally.Add(s, Ms(Clock::now() - at));
      }
    });
  std::mt19937_64 rng(kInputSeed);
  std::exponential_distribution<double> gap(rate);
  const auto start = Clock::now() + std::chrono::milliseconds(10);
  const auto end = start + std::chrono::microseconds(static_cast<int64_t>(a.duration_s * 1e6));
  auto next = start;
  while (next < end) {
    {
      std::lock_guard<std::mutex> lock(mu);
      due.push_back(next);
    }
    cv.notify_one();
    next += std::chrono::nanoseconds(static_cast<int64_t>(gap(rng) * 1e9));
    std::this_thread::sleep_until(std::min(next, end) - std::chrono::microseconds(200));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  nlohmann::ordered_json row = Row(tally, a.duration_s, samples, out, "rate", rate);
  row["late_starts"] = late.load();
  if (late > 0)
    std::fprintf(out, "  %llu requests started late: all %d client threads were busy\n",
                 static_cast<unsigned long long>(late.load()), workers);
  return row;
}

}  // namespace

Status DoClient(const BenchArgs& a) {
  FILE* out = a.json == "-" ? stderr : stdout;
  ClientOptions opts;
  opts.timeout_ms = a.timeout_ms;
  opts.json = a.tensor_format == "json";
  KILN_ASSIGN_OR_RETURN(std::vector<NamedTensor> request, MakeRequest(a, opts));
  const int samples = !request.empty() && request[0].tensor.rank() > 0
                          ? static_cast<int>(request[0].tensor.shape()[0])
                          : 1;
  {
    KILN_ASSIGN_OR_RETURN(auto probe, InferenceClient::Create(a.url, opts));
    std::vector<NamedTensor> outputs;
    Status s = probe->Infer(a.model, request, &outputs);
    if (!s.ok()) return s.AddContext("while sending a first request to " + a.url);
  }
  const bool by_rate = !a.rates.empty();
  std::fprintf(out,
               "kiln bench: model '%s' at %s (%s tensors); requests of %d sample(s)\n"
               "%11s %10s %10s %9s %9s %9s %10s %11s %10s %7s\n",
               a.model.c_str(), a.url.c_str(),
               a.url.rfind("grpc://", 0) == 0 ? "raw" : a.tensor_format.c_str(), samples,
               by_rate ? "rate/s" : "concurrency", "ok req/s", "items/s", "p50 ms", "p90 ms",
               "p99 ms", "refused/s", "refused p99", "expired/s", "failed");
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  if (by_rate) {
    for (double r : a.rates) {
      KILN_ASSIGN_OR_RETURN(auto row, RunRate(a, opts, request, r, samples, out));
      rows.push_back(std::move(row));
    }
  } else {
    for (int c : a.concurrency) {
      KILN_ASSIGN_OR_RETURN(auto row, RunConcurrency(a, opts, request, c, samples, out));
      rows.push_back(std::move(row));
    }
  }
  if (a.json.empty()) return OkStatus();
  nlohmann::ordered_json j;
  j["runtime"] = "kiln-client";
  j["url"] = a.url;
  j["model"] = a.model;
  j["tensor_format"] = a.url.rfind("grpc://", 0) == 0 ? "raw" : a.tensor_format;
  j["request_samples"] = samples;
  j["duration_s"] = a.duration_s;
  j[by_rate ? "rates" : "concurrency"] = rows;
  return WriteJson(a.json, j, out);
}

}  // namespace kiln::cli
