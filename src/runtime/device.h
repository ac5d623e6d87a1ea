// Device: where a backend keeps its tensors when that is not host memory (a GPU). The CPU backend
// has no Device; its plans use host memory directly. A plan for a device backend uploads its
// constants once at creation, and each concurrent run takes one DeviceRun from the plan's pool:
// its own arena, compute stream, upload and download streams, events and page-locked staging,
// all allocated the first time and reused afterwards (no allocation in a warm run).
//
// The order of one run is fixed (Executor::Run): Begin(), Upload() for every graph input
// (host -> staging -> device on the upload stream), StartCompute() (the compute stream waits for
// the uploads), every step's kernel on stream(), Download() for every output (the download stream
// waits for compute), Finish() (waits and copies out of staging). Two runs in flight on two
// threads use two DeviceRuns, so one run's copies overlap the other's compute.
//
// Thread-safety: a Device may be used from many threads; a DeviceRun by one run at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kiln/session.h"
#include "kiln/status.h"

namespace kiln::runtime {

// Device buffers inside one allocation start at multiples of cudaMalloc's alignment (256 bytes):
// the constants the planner uploads, a run's staging areas.
inline size_t DeviceAlignUp(size_t n) {
  constexpr size_t kDeviceAlign = 256;
  return (n + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign;
}

struct DeviceTimings {
  double upload_ms = 0, compute_ms = 0, download_ms = 0;  // from device events
  // CPU plans: when non-null, resized to the step count and filled with each step's wall time.
  std::vector<double>* step_ms = nullptr;
  // With step_ms: each step's start, steady clock microseconds since its epoch.
  std::vector<double>* step_start_us = nullptr;
};

class DeviceRun {
 public:
  virtual ~DeviceRun() = default;
  // Starts a run: makes the device current on this thread and clears what an earlier run (even
  // one that failed half-way) left queued.
  virtual Status Begin() = 0;
  // The run's arena in device memory (the plan's arena_bytes).
  virtual void* arena() = 0;
  // The compute stream kernels launch on (a cudaStream_t for CUDA), passed in ComputeContext.
  virtual void* stream() = 0;
  // Copies `bytes` from host memory into staging and queues the copy to `device_dst`.
  virtual Status Upload(const void* host_src, void* device_dst, size_t bytes) = 0;
  // Makes the compute stream wait for every upload queued so far.
  virtual Status StartCompute() = 0;
  // Queues a copy of `bytes` at `device_src` into staging, after all compute queued so far; the
  // bytes reach `host_dst` in Finish().
  virtual Status Download(const void* device_src, void* host_dst, size_t bytes) = 0;
  // Waits for the run to end and copies the downloads to their host destinations.
  virtual Status Finish() = 0;
  // Timings of the last finished run.
  virtual DeviceTimings LastTimings() const = 0;

  // Graph capture (CUDA graphs): between BeginCapture() and EndCapture() the kernels' launches on
  // stream() are recorded instead of run; Replay() launches the recorded work. A context that
  // captured once replays on every later run (its arena addresses never change). Devices without
  // graphs return false from SupportsCapture().
  virtual bool SupportsCapture() const { return false; }
  virtual bool captured() const { return false; }
  virtual Status BeginCapture() { return Unsupported("graph capture"); }
  virtual Status EndCapture() { return Unsupported("graph capture"); }
  virtual Status Replay() { return Unsupported("graph capture"); }
  // A profiler range around each step's launches, named "Op node" (NVTX on CUDA: Nsight Systems
  // shows the ranges on the CPU timeline, over the kernels they launched). Default: none.
  virtual void BeginRange(const char* name) {}
  virtual void EndRange() {}
  // Runs this context has finished (the first is never captured: it creates library handles and
  // warms caches, which capture does not allow).
  int completed_runs = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  // "NVIDIA H100 (sm_90, device 0)".
  virtual std::string Describe() const = 0;
  // What opening this device cost (driver, context, kernel modules); plugin_load_ms is filled
  // by OpenDevice.
  virtual DeviceStartup Startup() const { return {}; }
  // True only for test devices whose memory is host memory: lets the planner fall back to
  // reference kernels. A real device rejects nodes without a kernel of its backend.
  virtual bool host_accessible() const { return false; }
  // Makes the device current on the calling thread (before kernels prepare for it).
  virtual Status MakeCurrent() { return OkStatus(); }
  // Device memory that lives as long as the returned pointer (constants, prepacked weights).
  virtual StatusOr<std::shared_ptr<void>> Allocate(size_t bytes) = 0;
  // Host memory the device copies from fastest (page-locked on CUDA), for callers that fill
  // input batches themselves (the image pipeline's staging pool); DeviceRun::Upload then copies
  // from it directly. The default is ordinary 64-byte aligned memory.
  virtual StatusOr<std::shared_ptr<void>> AllocateHost(size_t bytes);
  // Synchronous copy into device memory, used while a plan is created.
  virtual Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) = 0;
  // A new run context: `arena_bytes` of device memory, `upload_bytes` and `download_bytes` of
  // page-locked staging (with `pinned`; without it, copies go straight from and to the caller's
  // pageable memory, to measure what staging buys).
  virtual StatusOr<std::unique_ptr<DeviceRun>> NewRun(size_t arena_bytes, size_t upload_bytes,
                                                      size_t download_bytes, bool pinned) = 0;
};

// 64-byte aligned ordinary host memory (at least one byte).
StatusOr<std::shared_ptr<void>> AlignedHostMemory(size_t bytes);

// Backends with a device register a factory (one line next to the backend's code).
using DeviceFactory = StatusOr<std::shared_ptr<Device>> (*)(int device_index);
struct DeviceRegistrar {
  DeviceRegistrar(Backend backend, DeviceFactory factory);
};

// The device of `backend`: nullptr for kCpu (host memory), the opened device for a registered
// device backend, whose plugin (libkiln_<name>.so, runtime/plugin.h) is loaded first when none
// is registered yet, and Unavailable otherwise (for kCuda in a build without CUDA, saying so).
StatusOr<std::shared_ptr<Device>> OpenDevice(Backend backend, int device_index);

}  // namespace kiln::runtime
