// The CUDA device (runtime/device.h): device memory from cudaMalloc, and per-run contexts with a
// compute stream, separate upload and download streams, events between them (the compute stream
// waits for the uploads, the download stream for the compute), and page-locked staging buffers
// from cudaHostAlloc, all allocated once per context. The events also time the run's three parts.
// With SessionOptions::cuda_graph, a context's second run is captured (cudaStreamBeginCapture on
// the compute stream) into a CUDA graph that every later run replays with one launch.
// Registered as backend "cuda"; opening it fails with Unavailable when no device is visible.
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels/launch.h"
#include "runtime/device.h"
#include "runtime/kernel.h"
#include "runtime/plugin_abi.h"

// The plugin's ABI stamp: kiln refuses to open a libkiln_cuda.so built for another kiln.
KILN_PLUGIN_ABI_STAMP;

namespace kiln::cuda {

namespace {

constexpr size_t kAlign = 256;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

std::shared_ptr<void> DeviceMemory(void* p) {
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}
std::shared_ptr<void> PinnedMemory(void* p) {
  return std::shared_ptr<void>(p, [](void* q) { cudaFreeHost(q); });
}

class CudaRun final : public runtime::DeviceRun {
 public:
  ~CudaRun() override {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    for (cudaEvent_t e : {up_begin_, up_end_, compute_end_, down_end_})
      if (e) cudaEventDestroy(e);
    for (cudaStream_t s : {compute_, upload_, download_})
      if (s) cudaStreamDestroy(s);
  }

  // pinned == false copies straight from and to the caller's pageable memory (for measuring
  // what page-locked staging buys; the driver then stages internally and synchronously).
  static StatusOr<std::unique_ptr<runtime::DeviceRun>> Create(int device, size_t arena_bytes,
                                                              size_t upload_bytes,
                                                              size_t download_bytes, bool pinned) {
    auto run = std::make_unique<CudaRun>();
    run->device_ = device;
    run->pinned_ = pinned;
    KILN_CUDA_CHECK(cudaSetDevice(device));
    void* p = nullptr;
    KILN_CUDA_CHECK(cudaMalloc(&p, arena_bytes));
    run->arena_ = DeviceMemory(p);
    if (pinned) {
      KILN_CUDA_CHECK(cudaHostAlloc(&p, std::max<size_t>(upload_bytes, 1), cudaHostAllocDefault));
      run->staging_in_ = PinnedMemory(p);
      KILN_CUDA_CHECK(cudaHostAlloc(&p, std::max<size_t>(download_bytes, 1), cudaHostAllocDefault));
      run->staging_out_ = PinnedMemory(p);
    }
    run->upload_capacity_ = upload_bytes;
    run->download_capacity_ = download_bytes;
    for (cudaStream_t* s : {&run->compute_, &run->upload_, &run->download_})
      KILN_CUDA_CHECK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&run->up_begin_, &run->up_end_, &run->compute_end_, &run->down_end_})
      KILN_CUDA_CHECK(cudaEventCreate(e));
    return std::unique_ptr<runtime::DeviceRun>(std::move(run));
  }

  Status Begin() override {
    KILN_CUDA_CHECK(cudaSetDevice(device_));
    // An error an earlier call left behind (not a sticky fault) must not be read as this run's
    // first launch failing.
    (void)cudaGetLastError();
    for (cudaStream_t s : {upload_, compute_, download_}) KILN_CUDA_CHECK(cudaStreamSynchronize(s));
    upload_used_ = download_used_ = 0;
    pending_.clear();
    compute_started_ = compute_ended_ = false;
    KILN_CUDA_CHECK(cudaEventRecord(up_begin_, upload_));
    return OkStatus();
  }
  void* arena() override { return arena_.get(); }
  void* stream() override { return compute_; }

  Status Upload(const void* host_src, void* device_dst, size_t bytes) override {
    if (!pinned_ || IsPageLocked(host_src)) {  // pageable mode, or the caller's memory is pinned
      KILN_CUDA_CHECK(
          cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, upload_));
      return OkStatus();
    }
    if (upload_used_ + bytes > upload_capacity_)
      return Internal("upload staging overflow: " + std::to_string(upload_used_ + bytes) + " > " +
                      std::to_string(upload_capacity_) + " bytes");
    char* staged = static_cast<char*>(staging_in_.get()) + upload_used_;
    std::memcpy(staged, host_src, bytes);
    KILN_CUDA_CHECK(cudaMemcpyAsync(device_dst, staged, bytes, cudaMemcpyHostToDevice, upload_));
    upload_used_ += AlignUp(bytes);
    return OkStatus();
  }

  Status StartCompute() override {
    compute_started_ = true;
    KILN_CUDA_CHECK(cudaEventRecord(up_end_, upload_));
    KILN_CUDA_CHECK(cudaStreamWaitEvent(compute_, up_end_, 0));
    return OkStatus();
  }

  Status Download(const void* device_src, void* host_dst, size_t bytes) override {
    if (!compute_ended_) KILN_RETURN_IF_ERROR(EndCompute());
    if (!pinned_) {  // straight into the caller's memory: no staging to fill
      KILN_CUDA_CHECK(
          cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, download_));
      return OkStatus();
    }
    if (download_used_ + bytes > download_capacity_)
      return Internal("download staging overflow: " + std::to_string(download_used_ + bytes) +
                      " > " + std::to_string(download_capacity_) + " bytes");
    char* staged = static_cast<char*>(staging_out_.get()) + download_used_;
    KILN_CUDA_CHECK(cudaMemcpyAsync(staged, device_src, bytes, cudaMemcpyDeviceToHost, download_));
    pending_.push_back({staged, host_dst, bytes});
    download_used_ += AlignUp(bytes);
    return OkStatus();
  }

  Status Finish() override {
    if (!compute_ended_) KILN_RETURN_IF_ERROR(EndCompute());
    KILN_CUDA_CHECK(cudaEventRecord(down_end_, download_));
    KILN_CUDA_CHECK(cudaEventSynchronize(down_end_));
    // Kernel faults surface at the next synchronizing call: report them as this run's error.
    KILN_CUDA_CHECK(cudaGetLastError());
    for (const Pending& p : pending_) std::memcpy(p.host, p.staged, p.bytes);
    pending_.clear();
    float ms = 0;
    KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, up_begin_, up_end_));
    timings_.upload_ms = ms;
    KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, up_end_, compute_end_));
    timings_.compute_ms = ms;
    KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, compute_end_, down_end_));
    timings_.download_ms = ms;
    return OkStatus();
  }

  runtime::DeviceTimings LastTimings() const override { return timings_; }

  bool SupportsCapture() const override { return true; }
  bool captured() const override { return exec_ != nullptr; }
  Status BeginCapture() override {
    KILN_CUDA_CHECK(cudaStreamBeginCapture(compute_, cudaStreamCaptureModeThreadLocal));
    return OkStatus();
  }
  Status EndCapture() override {
    KILN_CUDA_CHECK(cudaStreamEndCapture(compute_, &graph_));
    KILN_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
    return OkStatus();
  }
  // NVTX (header-only nvtx3 from the toolkit): free without a profiler attached; under Nsight
  // Systems each step's launches sit in a range named after its node. A replayed CUDA graph runs
  // no steps, so shows one launch instead.
  void BeginRange(const char* name) override { nvtxRangePushA(name); }
  void EndRange() override { nvtxRangePop(); }
  Status Replay() override {
    KILN_CUDA_CHECK(cudaGraphLaunch(exec_, compute_));
    return OkStatus();
  }

 private:
  // Whether `p` is page-locked host memory (Device::AllocateHost): copied without staging.
  static bool IsPageLocked(const void* p) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();  // clear the error of an unregistered pointer
      return false;
    }
    return a.type == cudaMemoryTypeHost;
  }

  Status EndCompute() {
    // A caller that launched without StartCompute (nothing uploaded) still gets every event
    // recorded, so Finish's timings read recorded events.
    if (!compute_started_) KILN_RETURN_IF_ERROR(StartCompute());
    compute_ended_ = true;
    KILN_CUDA_CHECK(cudaEventRecord(compute_end_, compute_));
    KILN_CUDA_CHECK(cudaStreamWaitEvent(download_, compute_end_, 0));
    return OkStatus();
  }

  struct Pending {
    const void* staged;
    void* host;
    size_t bytes;
  };
  int device_ = 0;
  bool pinned_ = true, compute_started_ = false, compute_ended_ = false;
  std::shared_ptr<void> arena_, staging_in_, staging_out_;
  size_t upload_capacity_ = 0, download_capacity_ = 0, upload_used_ = 0, download_used_ = 0;
  cudaStream_t compute_ = nullptr, upload_ = nullptr, download_ = nullptr;
  cudaEvent_t up_begin_ = nullptr, up_end_ = nullptr, compute_end_ = nullptr, down_end_ = nullptr;
  std::vector<Pending> pending_;
  runtime::DeviceTimings timings_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

class CudaDevice final : public runtime::Device {
 public:
  CudaDevice(int index, const cudaDeviceProp& prop, DeviceStartup startup)
      : index_(index), prop_(prop), startup_(std::move(startup)) {}

  DeviceStartup Startup() const override { return startup_; }

  std::string Describe() const override {
    return std::string(prop_.name) + " (sm_" + std::to_string(prop_.major) +
           std::to_string(prop_.minor) + ", device " + std::to_string(index_) + ", " +
           std::to_string(prop_.totalGlobalMem >> 20) + " MiB)";
  }

  Status MakeCurrent() override { return CheckCuda(cudaSetDevice(index_), "cudaSetDevice"); }

  StatusOr<std::shared_ptr<void>> Allocate(size_t bytes) override {
    KILN_CUDA_CHECK(cudaSetDevice(index_));
    void* p = nullptr;
    KILN_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
    return DeviceMemory(p);
  }

  StatusOr<std::shared_ptr<void>> AllocateHost(size_t bytes) override {
    void* p = nullptr;
    KILN_CUDA_CHECK(cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocPortable));
    return PinnedMemory(p);
  }

  Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) override {
    KILN_CUDA_CHECK(cudaSetDevice(index_));
    KILN_CUDA_CHECK(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
    return OkStatus();
  }

  StatusOr<std::unique_ptr<runtime::DeviceRun>> NewRun(size_t arena_bytes, size_t upload_bytes,
                                                       size_t download_bytes,
                                                       bool pinned) override {
    return CudaRun::Create(index_, arena_bytes, upload_bytes, download_bytes, pinned);
  }

 private:
  int index_;
  cudaDeviceProp prop_;
  DeviceStartup startup_;
};

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Opening a device measures the cold start's parts (DeviceStartup): the first runtime call
// (driver initialisation), the primary context, and loading kiln's kernel modules -- with the
// PTX JIT when the binary has no SASS for this GPU -- so none of them hides in the first run.
StatusOr<std::shared_ptr<runtime::Device>> OpenCudaDevice(int index) {
  DeviceStartup startup;
  auto t0 = std::chrono::steady_clock::now();
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  startup.driver_init_ms = MsSince(t0);
  if (e != cudaSuccess || count == 0)
    return Unavailable(std::string("no CUDA device is visible (cudaGetDeviceCount: ") +
                       (e == cudaSuccess ? "0 devices" : cudaGetErrorName(e)) +
                       "); `kiln doctor` reports the driver and devices; use --device cpu");
  if (index < 0 || index >= count)
    return InvalidArgument("CUDA device " + std::to_string(index) + " does not exist; " +
                           std::to_string(count) + " visible");
  cudaDeviceProp prop;
  KILN_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  t0 = std::chrono::steady_clock::now();
  KILN_CUDA_CHECK(cudaSetDevice(index));
  KILN_CUDA_CHECK(cudaFree(nullptr));  // creates the primary context
  startup.context_ms = MsSince(t0);
  const cuda_kernels::ModuleLoad modules = cuda_kernels::LoadModules(KILN_CUDA_ARCHITECTURES);
  if (!modules.error.empty())
    return DeviceError("cannot load kiln's CUDA kernels on " + std::string(prop.name) + ": " +
                       modules.error + "; `kiln doctor` says whether this GPU is supported");
  startup.module_load_ms = modules.ms;
  startup.modules = modules.modules;
  startup.kernel_arch = modules.kernel_arch;
  startup.ptx_jit = modules.ptx_jit;
  return std::shared_ptr<runtime::Device>(new CudaDevice(index, prop, std::move(startup)));
}

// fp16: convolutions and matrix products in float16 on Tensor Cores (every supported GPU,
// sm_75 and newer, has them), everything else float32.
Status CudaPrecision(Precision precision) {
  if (precision == Precision::kFp32 || precision == Precision::kFp16) return OkStatus();
  return InvalidArgument("backend 'cuda' runs precision fp32 or fp16; got '" +
                         std::string(PrecisionName(precision)) + "'");
}

runtime::DeviceRegistrar cuda_device(Backend::kCuda, &OpenCudaDevice);

// The plan cache key includes the cuDNN loaded at run time (its algorithm numbering and timings),
// the CUDA runtime and the driver.
// With the CUDA runtime and driver versions (0 when no driver is installed).
std::string CudnnVersionString() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  return "cuDNN " + std::to_string(cudnnGetVersion()) + ", CUDA runtime " +
         std::to_string(runtime) + ", driver " + std::to_string(driver);
}
runtime::LibraryVersionRegistrar cudnn_version(Backend::kCuda, &CudnnVersionString);
runtime::PrecisionCheckRegistrar cuda_precision(Backend::kCuda, &CudaPrecision);

}  // namespace

}  // namespace kiln::cuda
