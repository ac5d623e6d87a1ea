// `kiln serve MODEL|FOLDER... [--http-port N]`: KServe v2 over HTTP for one model (zero
// configuration) or a model repository folder. Ready after the warm-up; SIGTERM or SIGINT drains
// (not ready, new requests 503, accepted ones finish) and exits within --drain-timeout.
#include <pthread.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "common.h"
#include "kiln/server.h"
#include "kiln/session.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

struct ServeArgs {
  std::vector<std::string> models;
  std::string host = "0.0.0.0";
  int http_port = 8000;
  int grpc_port = 8001;
  std::string port_file;
  int max_batch = 32;
  int64_t max_queue_delay_us = 500;
  std::vector<int> preferred;
  size_t max_queue = 1024;
  int64_t queue_timeout_us = 0;
  bool timeout_includes_run = false;
  int compute_nice = 0;
  double drain_timeout_s = 30;
  int http_threads = 2;
  int instances = 1;
  double max_body_mb = 64;
  int max_connections = 1024;
  bool no_warmup = false;
  std::string device = "cpu";
  int threads = 0;
  std::string precision = "fp32";
  std::string model_control = "none";
  std::string trace;
  double trace_seconds = 10;
};

// name -> model file. A file is served under its stem; a folder holds NAME.onnx files and/or
// Triton-style NAME/[VERSION/]model.onnx folders (the highest numeric version).
StatusOr<std::map<std::string, std::pair<std::string, std::string>>> FindModels(
    const std::vector<std::string>& paths) {
  std::map<std::string, std::pair<std::string, std::string>> found;  // name -> (file, version)
  auto add = [&](const std::string& name, const fs::path& file,
                 const std::string& version) -> Status {
    if (!found.emplace(name, std::make_pair(file.string(), version)).second)
      return InvalidArgument("two models are named '" + name + "' (" + found[name].first + ", " +
                             file.string() + ")");
    return OkStatus();
  };
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) {
      KILN_RETURN_IF_ERROR(add(fs::path(p).stem().string(), p, "1"));
      continue;
    }
    if (!fs::is_directory(p, ec)) return NotFound("no model file or folder at " + p);
    std::vector<fs::directory_entry> entries(fs::directory_iterator(p, ec), {});
    std::sort(entries.begin(), entries.end());
    for (const fs::directory_entry& e : entries) {
      const fs::path& f = e.path();
      if (e.is_regular_file() && f.extension() == ".onnx") {
        KILN_RETURN_IF_ERROR(add(f.stem().string(), f, "1"));
      } else if (e.is_directory()) {
        if (fs::is_regular_file(f / "model.onnx")) {
          KILN_RETURN_IF_ERROR(add(f.filename().string(), f / "model.onnx", "1"));
          continue;
        }
        long best = -1;
        for (const fs::directory_entry& v : fs::directory_iterator(f, ec)) {
          const std::string n = v.path().filename().string();
          if (!v.is_directory() || n.empty() ||
              n.find_first_not_of("0123456789") != std::string::npos || n.size() > 9)
            continue;
          if (fs::is_regular_file(v.path() / "model.onnx")) best = std::max(best, std::stol(n));
        }
        if (best >= 0)
          KILN_RETURN_IF_ERROR(add(f.filename().string(), f / std::to_string(best) / "model.onnx",
                                   std::to_string(best)));
      }
    }
  }
  if (found.empty()) return NotFound("no .onnx model in the given paths");
  return found;
}

Status DoServe(const ServeArgs& a) {
#if defined(__GLIBC__)
  // Blocks of 4 MiB or more from their own mappings, returned to the system when freed: glibc
  // otherwise raises this threshold to the largest block freed so far (up to 32 MiB), and a
  // model unloaded after being loaded on another thread could leave such blocks in its heaps
  // (tests/serving/repository_check.py saw 32 MiB kept in some runs without this).
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
#endif
  // SIGINT and SIGTERM are taken by sigwait below: block them before any thread starts, so every
  // thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  KILN_ASSIGN_OR_RETURN(auto files, FindModels(a.models));
  auto load = [&a](const std::string& name, const std::string& file,
                   const std::string& version) -> StatusOr<ServedModel> {
    SessionOptions opts;
    opts.backend = BackendArg(a.device);
    opts.num_threads = a.threads;
    opts.precision = PrecisionArg(a.precision);
    // On a thread that ends: no idle OpenMP pool stays behind to slow the batchers' runs.
    auto session = OnOwnThread([&] { return Session::Load(file, opts); });
    if (!session.ok())
      return Status(session.status()).AddContext("while loading model '" + name + "'");
    std::printf("kiln serve: model '%s' version %s from %s\n", name.c_str(), version.c_str(),
                file.c_str());
    std::fflush(stdout);
    return ServedModel{name, version, std::shared_ptr<const Session>(std::move(*session))};
  };
  std::vector<ServedModel> models;
  for (const auto& [name, fv] : files) {
    KILN_ASSIGN_OR_RETURN(ServedModel m, load(name, fv.first, fv.second));
    models.push_back(std::move(m));
  }
  ServerOptions o;
  o.host = a.host;
  o.http_port = a.http_port;
  o.grpc_port = a.grpc_port;
  o.batch.max_batch = a.max_batch;
  o.batch.max_queue_delay_us = a.max_queue_delay_us;
  o.batch.preferred_sizes = a.preferred;
  o.batch.max_queue = a.max_queue;
  o.queue_timeout_us = a.queue_timeout_us;
  o.batch.deadline_includes_run = a.timeout_includes_run;
  o.batch.worker_nice = a.compute_nice;
  o.drain_timeout_ms = static_cast<int64_t>(a.drain_timeout_s * 1000);
  o.http_threads = a.http_threads;
  o.instances = a.instances;
  o.max_body_bytes = static_cast<size_t>(a.max_body_mb * 1024 * 1024);
  o.max_connections = a.max_connections;
  o.warm_up = !a.no_warmup;
  if (a.model_control == "explicit")
    // The paths are listed again at each load: a new model or version in a folder is found.
    o.repository = [paths = a.models, load](const std::string& name) -> StatusOr<ServedModel> {
      KILN_ASSIGN_OR_RETURN(auto now, FindModels(paths));
      auto it = now.find(name);
      if (it == now.end()) return NotFound("the repository has no model named '" + name + "'");
      return load(name, it->second.first, it->second.second);
    };
  KILN_ASSIGN_OR_RETURN(auto server, Server::Start(std::move(models), o));
  const std::string grpc = server->grpc_port() < 0
                               ? std::string("no gRPC")
                               : "grpc " + a.host + ":" + std::to_string(server->grpc_port());
  std::printf("kiln serve: listening on http://%s:%d and %s (live; ready after the warm-up)\n",
              a.host.c_str(), server->http_port(), grpc.c_str());
  std::fflush(stdout);
  if (!a.port_file.empty()) {
    std::ofstream f(a.port_file + ".tmp");
    f << server->http_port() << "\n" << server->grpc_port() << "\n";
    f.close();
    fs::rename(a.port_file + ".tmp", a.port_file);
  }
  const auto warm_start = std::chrono::steady_clock::now();
  std::thread announce([&server, warm_start] {
    Status s = server->WaitReady();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - warm_start)
            .count();
    if (s.ok())
      std::printf("kiln serve: ready (warm-up %.0f ms)\n", ms);
    else
      std::fprintf(stderr, "kiln serve: not ready: %s\n", s.ToString().c_str());
    std::fflush(stdout);
  });
  // --trace: the first --trace-seconds after the warm-up (or until the signal), then the file.
  std::mutex trace_mu;
  std::condition_variable trace_cv;
  bool stopping = false;
  std::thread tracer;
  if (!a.trace.empty())
    tracer = std::thread([&] {
      if (!server->WaitReady().ok()) return;
      server->StartTrace();
      std::printf("kiln serve: tracing for %.1f s\n", a.trace_seconds);
      std::fflush(stdout);
      {
        std::unique_lock<std::mutex> lock(trace_mu);
        trace_cv.wait_for(lock, std::chrono::duration<double>(a.trace_seconds),
                          [&] { return stopping; });
      }
      const std::string json = server->StopTrace();
      std::ofstream f(a.trace, std::ios::binary);
      f << json;
      if (f.good())
        std::printf("kiln serve: trace written to %s (ui.perfetto.dev opens it)\n",
                    a.trace.c_str());
      else
        std::fprintf(stderr, "kiln serve: cannot write the trace to %s\n", a.trace.c_str());
      std::fflush(stdout);
    });
  int sig = 0;
  sigwait(&signals, &sig);
  {
    std::lock_guard<std::mutex> lock(trace_mu);
    stopping = true;
    trace_cv.notify_all();
  }
  std::printf("kiln serve: %s: draining (not ready; new requests get 503)\n",
              sig == SIGTERM ? "SIGTERM" : "SIGINT");
  std::fflush(stdout);
  const DrainReport r = server->Drain();
  announce.join();
  if (tracer.joinable()) tracer.join();
  std::printf("kiln serve: drained in %.0f ms: %llu in flight at the signal, %llu unfinished\n",
              r.elapsed_ms, static_cast<unsigned long long>(r.in_flight_at_start),
              static_cast<unsigned long long>(r.unfinished));
  // What was answered, by outcome (the kiln_requests_total counters).
  std::istringstream metrics(server->MetricsText());
  for (std::string line; std::getline(metrics, line);)
    if (line.rfind("kiln_requests_total{", 0) == 0) std::printf("kiln serve: %s\n", line.c_str());
  std::fflush(stdout);
  if (r.unfinished > 0) {
    // The drain timed out: leave now rather than run what is still queued.
    std::fprintf(stderr, "kiln serve: %llu requests unanswered at the drain timeout\n",
                 static_cast<unsigned long long>(r.unfinished));
    std::fflush(stderr);
    std::_Exit(ExitCodeFor(Status(StatusCode::kDeadlineExceeded, "drain timeout")));
  }
  return OkStatus();
}

}  // namespace

void AddServeCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve models over KServe v2 HTTP and gRPC (Triton-compatible), with dynamic batching");
  cmd->add_option("models", args->models,
                  "Model files, or folders of NAME.onnx / NAME/[VERSION/]model.onnx")
      ->required();
  cmd->add_option("--host", args->host, "Address to listen on (default 0.0.0.0)");
  cmd->add_option("--http-port", args->http_port, "HTTP port (default 8000; 0: any free port)");
  cmd->add_option("--grpc-port", args->grpc_port,
                  "gRPC port (default 8001; 0: any free port; -1: no gRPC)")
      ->check(CLI::Range(-1, 65535));
  cmd->add_option("--port-file", args->port_file,
                  "Write the bound ports to this file: HTTP, then gRPC (-1: none), one per line");
  cmd->add_option("--max-batch", args->max_batch, "Samples per batch at most (default 32)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-queue-delay-us", args->max_queue_delay_us,
                  "Longest wait for company in a batch (default 500)")
      ->check(CLI::Range(int64_t{0}, int64_t{60000000}));
  cmd->add_option("--preferred-batch", args->preferred, "Preferred batch sizes")->delimiter(',');
  cmd->add_option("--max-queue", args->max_queue,
                  "Requests waiting per model; more get 503 with Retry-After (default 1024)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24));
  cmd->add_option("--queue-timeout-us", args->queue_timeout_us,
                  "Drop requests still queued after this long (504 / DEADLINE_EXCEEDED) unless "
                  "they set their own timeout; 0 (default): none")
      ->check(CLI::Range(int64_t{0}, int64_t{3600000000}));
  cmd->add_flag("--timeout-includes-run", args->timeout_includes_run,
                "A timeout (--queue-timeout-us or the request's own) covers the run too: a "
                "request whose batch would end after it is answered 504 at once, unrun "
                "(expected run: the last measured run of that batch size)");
  cmd->add_option("--compute-nice", args->compute_nice,
                  "Run the batches this many nice levels below the I/O threads (0-19; default "
                  "0): where clients or I/O share the compute cores, refusals and answers are "
                  "sent while a batch runs; the batches yield to everything else too")
      ->check(CLI::Range(0, 19));
  cmd->add_option("--drain-timeout", args->drain_timeout_s,
                  "Seconds to finish accepted requests after SIGTERM (default 30)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--instances", args->instances,
                  "Batches in flight per model (batchers over one session; default 1); give "
                  "each --threads cores/instances")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--http-threads", args->http_threads, "Threads parsing and answering HTTP")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--max-body-mb", args->max_body_mb, "Largest request body (default 64 MiB)")
      ->check(CLI::Range(0.001, 4096.0));
  cmd->add_option("--max-connections", args->max_connections, "Open connections at most")
      ->check(CLI::Range(1, 1000000));
  cmd->add_flag("--no-warmup", args->no_warmup,
                "Ready at once, without preparing every batch size first");
  cmd->add_option("--device,-d", args->device, "Backend: cpu (default) or cuda");
  cmd->add_option("--threads", args->threads, "Compute threads per model (0: physical cores)");
  cmd->add_option("--precision", args->precision, "fp32 (default) or bf16")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--trace", args->trace,
                  "Write Chrome/Perfetto trace JSON of the first --trace-seconds after the "
                  "warm-up (or up to the signal): each batch on its batcher thread with a slice "
                  "per kernel, and each request's wait in the queue");
  cmd->add_option("--trace-seconds", args->trace_seconds, "With --trace: how long (default 10)")
      ->check(CLI::Range(0.01, 3600.0));
  cmd->add_option("--model-control-mode", args->model_control,
                  "none (default) or explicit: POST /v2/repository/models/NAME/load|unload "
                  "loads (again, from the given files and folders) and unloads models while "
                  "serving (Triton's explicit mode; every model found is loaded at start)")
      ->check(CLI::IsMember({"none", "explicit"}));
  cmd->callback([args, exit_code] {
    Status s = DoServe(*args);
    if (!s.ok()) *exit_code = Fail(s);
  });
}

}  // namespace kiln::cli
