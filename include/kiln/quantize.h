// Post-training INT8 quantization with calibration: a float32 ONNX model in, a standard QDQ ONNX
// model out (QuantizeLinear -> DequantizeLinear around the float ops, which kiln, ONNX Runtime and
// OpenVINO all run).
//
// Scheme: Conv, Gemm and MatMul nodes with constant weights are quantized. Weights: int8,
// symmetric, one scale per output channel (per tensor for models older than opset 13).
// Activations (each quantized node's input): uint8 with zero point 0 when calibration saw no
// negative value (after ReLU-family ops), else int8 symmetric; the range from the calibration
// method. Biases stay float32. By default the first and the last quantizable nodes stay float
// (the layers INT8 hurts most); `keep_float` names more, `quantize_all` overrides the default.
//
// Use: Create, then for pass in 0..passes()-1: BeginPass(pass) and Observe() every calibration
// batch (the same batches in every pass), then Write(). Memory is the calibration model's plus
// (quantized tensors x histogram bins; with channel_activations also channels x bins for each
// per-channel tensor), independent of the number of samples. Not thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/session.h"
#include "kiln/status.h"

namespace kiln {

struct QuantizeOptions {
  // "minmax", "percentile", "entropy" (TensorRT's KL search), "mse", or "auto": per tensor the
  // one of those four whose quantized model's outputs are closest to float's (mean squared
  // error over the outputs, relative to their size) on the first calibration batch: a greedy
  // search in graph order from percentile, one quantized model per candidate (an extra pass).
  std::string method = "percentile";
  double percentile = 99.99;
  int histogram_bins = 2048;
  // Nodes kept float32: a node name, an op type ("Gemm"), or a pattern with * and ? matched
  // against node names.
  std::vector<std::string> keep_float;
  // Also quantize the first and last quantizable nodes.
  bool quantize_all = false;
  // Fast bias correction (NNCF's): one more pass over the calibration data runs each quantized
  // convolution twice on the float model's input to it, in float and in int8, and adds to its
  // bias the mean (per output channel) of float output minus int8 output, removing the shift its
  // own quantization (clipping, rounding) leaves. On by default since 2026-11-29.
  bool bias_correction = true;
  // Depthwise convolutions' inputs get one scale per channel (QuantizeLinear/DequantizeLinear
  // with axis 1, zero points 0), each channel's range from the calibration method: one scale per
  // tensor spans channels whose ranges differ by 100x in MobileNet-style blocks. A tensor gets
  // them only when every quantizable node reading it is depthwise; needs opset 13 (per-channel
  // Q/DQ). kiln's int8 depthwise convolutions fold them into their per-channel output scales;
  // the convolution writing such a tensor divides per channel (a multiply post-op: MobileNetV2
  // ran 10-15 % slower at batch 32 on an AVX2 CPU). ONNX Runtime and TensorRT run a convolution
  // with such an input in float.
  bool channel_activations = false;
  // A Concat whose output only quantized nodes read gets that output's scale on each of its inputs
  // (each quantized before the Concat): the Concat then joins 8-bit values, and what writes its
  // inputs can write them in 8 bits. The values the readers see are unchanged, because
  // quantization is elementwise. false: the Concat runs float between its inputs and its
  // quantized output. The same for ops that pass values through unchanged (MaxPool: quantization
  // is monotonic, so the maximum commutes with it; Split, Resize/Upsample in mode nearest,
  // Reshape, Flatten, Squeeze, Unsqueeze, Transpose) where a quantized convolution (through its
  // activation or not), a planned Add or another such op writes their input and quantized nodes
  // read everything around them: the tensors so connected share one scale (the widest of them).
  bool share_concat_scales = true;
  // Residual Adds (two computed inputs, one written by a quantized convolution) whose sum (or
  // its Relu) a quantized node reads get both inputs quantized, as ONNX Runtime's and NNCF's
  // quantizers do: the residual stream stays int8 (the convolution, the sum and its Relu in one
  // oneDNN convolution: fuse_qconv_add). false: the Adds run float, the convolution before each
  // adds its float residual and a QuantizeLinear follows (more accurate, slower). An Add kept by
  // --keep-float (its name or "Add") stays float.
  bool quantize_adds = true;
  // An activation with a negative side under half its positive one (SiLU's -0.28 tail,
  // HardSwish's -0.375 after a larger positive range) is uint8 over [min, threshold] with a zero
  // point instead of int8 symmetric (half of whose negative codes would go unused): up to twice
  // the resolution. oneDNN takes the zero point as its run-time source zero point. false: int8
  // symmetric for every activation calibration saw negative.
  bool asymmetric_activations = true;
  // The statistics passes run the calibration model (every quantized tensor an output) on at
  // most this many samples at a time, whatever the batch given to Observe: its memory is one
  // such run's tensors. The statistics do not depend on it. ResNet-50, 300 samples in batches of
  // 32, 2 threads, AVX512-VNNI EPYC: 8 gave 47 s and 1.5 GB peak RSS, 32 gave 54 s and 4.6 GB
  // (identical models). 0: the whole batch.
  int64_t run_batch = 8;
  // Threads of the calibration session (0 = the machine's cores).
  int num_threads = 0;
};

// One quantized activation tensor.
struct QuantizedActivation {
  std::string tensor;
  std::string dtype;  // "uint8" or "int8"
  float scale = 0.f;
  int zero_point = 0;
  float min = 0.f, max = 0.f;  // observed in calibration
  float threshold = 0.f;       // the clipping point the method chose
  // With per-channel scales (QuantizeOptions::channel_activations): one per channel; `scale`
  // is then the largest.
  std::vector<float> channel_scales;
  // Method "auto": the method whose threshold the search kept for this tensor ("" otherwise).
  std::string method;
};

struct QuantizeSummary {
  std::string method;
  int64_t samples = 0;  // calibration samples observed (first pass)
  std::vector<std::string> quantized_nodes;
  // Quantizable nodes left float32, with the reason ("first layer", "--keep-float Gemm", ...).
  std::vector<std::pair<std::string, std::string>> float_nodes;
  std::vector<QuantizedActivation> activations;
  bool per_channel = true;
  // Non-zero: the model imported this opset (7-12) and was converted to opset 13 before
  // calibration (onnx/opset_convert.h), because per-channel weight scales need
  // DequantizeLinear-13 (and opsets before 10 have no QuantizeLinear); the output imports 13.
  int64_t converted_from_opset = 0;
  // With a conversion: the largest |original - converted| over the float outputs of the first
  // calibration batch, run through both forms (a relative difference over 1e-4 is an error);
  // -1 when no batch ran them (ranges from the calibration cache).
  double conversion_max_diff = -1;
  // Why weights are per tensor when per_channel is false (the conversion's error).
  std::string per_tensor_reason;
  int64_t model_bytes = 0;  // of the written model
  bool from_cache = false;  // the ranges came from the calibration cache
  int bias_corrected = 0;   // convolutions whose bias was corrected
  int shared_concats = 0;   // Concats whose inputs share their output's scale
  int shared_pools = 0;     // MaxPools after a quantized convolution that share it likewise
  // AveragePools likewise: their output takes their input's scale (the widest of their group's
  // members), and a runtime averages the 8-bit values.
  int shared_averages = 0;
  // Split, Resize/Upsample (nearest), Reshape, Flatten, Squeeze, Unsqueeze, Transpose likewise.
  int shared_moves = 0;
  // Quantized activations whose scale was widened to their shared-scale group's (or made
  // signed by it).
  int widened_scales = 0;
  // Activations quantized as uint8 with a zero point (asymmetric_activations).
  int zero_point_activations = 0;
  int quantized_adds = 0;  // residual Adds with both inputs quantized (quantize_adds)
  // Method "auto": quantized models evaluated by the search (0 when the cache had the result),
  // the samples it ran on, and the model outputs' relative squared error before and after it.
  int auto_evaluations = 0;
  int64_t auto_samples = 0;
  double auto_error_start = 0, auto_error = 0;
};

// A key for calibration data: a content hash of the first `count` samples (rows along dim 0) of
// `samples`, with its dtype, shape and count (16 hex digits; not cryptographic).
std::string CalibrationDataKey(const Tensor& samples, int64_t count);

// One quantized node's output, float model against the quantized one on the same inputs.
struct LayerError {
  std::string node, tensor;
  double cosine = 0;   // cosine similarity of the two outputs (1 = same direction)
  double max_abs = 0;  // largest absolute difference
  double max_ref = 0;  // largest |float output|, for scale
};

class Quantizer {
 public:
  // Reads the model, picks the nodes to quantize and loads the calibration session. Fails when
  // nothing is left to quantize (every quantizable node kept float) or the options are invalid.
  static StatusOr<std::unique_ptr<Quantizer>> Create(const std::string& model_path,
                                                     const QuantizeOptions& options);
  ~Quantizer();

  // The calibration model's inputs (the original model's).
  const std::vector<TensorSpec>& inputs() const;
  // 1 for minmax, 2 otherwise (ranges, then histograms), 0 with a matching cache; plus 1 with
  // bias_correction (the last pass).
  int passes() const;
  Status BeginPass(int pass);
  // Runs one calibration batch and updates the statistics of every quantized tensor.
  Status Observe(const std::vector<NamedTensor>& batch);
  // Computes the scales and writes the QDQ model to `out_path` (and the calibration cache, when
  // UseCache named one that did not exist yet).
  StatusOr<QuantizeSummary> Write(const std::string& out_path);

  // Calibration cache: a JSON file with the range and threshold of every quantizable activation,
  // keyed by the model's content hash, `data_key` (what identifies the calibration data:
  // CalibrationDataKey()), the method, its percentile and histogram bins, and kiln's version.
  // Returns true when `path` holds a matching cache (passes() is then 0: Write calibrates
  // nothing), false when it does not exist (Write creates it). A cache that exists but differs
  // in any key is refused (InvalidArgument naming the key and both values), as is an unreadable
  // one; nothing is overwritten. Call before BeginPass.
  StatusOr<bool> UseCache(const std::string& path, const std::string& data_key);
  // After Write: the activations' scales in TensorRT's calibration table format (a header line,
  // then "tensor: <scale as the hex of its float32 bits>", symmetric int8 scale = threshold/127),
  // for building an engine elsewhere from the same calibration.
  Status WriteTensorRtCache(const std::string& path) const;
  // After Write: runs the float model and the written QDQ model on `batch` (held-out samples) and
  // compares every quantized node's output and the model's outputs ("(model output)"), in graph
  // order. Errors accumulate through the network: the first node with a large error is the one
  // to keep float (--keep-float).
  StatusOr<std::vector<LayerError>> Compare(const std::vector<NamedTensor>& batch);

 private:
  struct Impl;
  explicit Quantizer(std::unique_ptr<Impl> impl);
  Status ObserveChunk(const std::vector<NamedTensor>& batch);  // one calibration-model run
  // The first chunk after an opset conversion: the original model gives the same outputs.
  Status CheckConversion(const std::vector<NamedTensor>& batch,
                         const std::vector<NamedTensor>& converted_outs);
  std::unique_ptr<Impl> impl_;
};

// ---- The pipeline behind `kiln quantize` (src/quant/samples.cc, pipeline.cc,
// accuracy_control.cc) ----
//
// Use: QuantizeWithCalibration(job) loads the calibration samples, calibrates and writes
// job.out; then optionally CompareHeldOut(run, batch) (per-node errors) and, when
// job.max_drop >= 0, RunAccuracyControl(job, run) (keeps the most sensitive nodes float until the
// score is within the budget, rewriting job.out). Nothing here prints: text goes to the optional
// QuantizeProgress callbacks, results come back as structs. Error messages name the `kiln quantize`
// flag of each QuantizeJob field (--calibrate, --samples, --max-drop, --labels, ...). Not
// thread-safe: one job, its QuantizeRun and its callbacks on one thread at a time; jobs share no
// state (each has its own quantizer, sessions and temporary cache), so separate jobs writing
// separate files may run on separate threads.

// What to quantize and how. Paths are files; counts are samples (rows along dim 0 of a tensor
// file, or images).
struct QuantizeJob {
  std::string model;  // the float32 ONNX model
  std::string out;    // where the QDQ model is written
  // Calibration samples: a tensor file (.npy or ONNX .pb, samples along dim 0) or images (a
  // directory or a .txt/.lst list file, decoded through `recipe`) for a one-input model; for a
  // model with several inputs NAME=FILE once per input, tensor files with as many samples each.
  std::vector<std::string> calibrate;
  // Or the calibration samples in memory (used when `calibrate` is empty; both or neither is
  // InvalidArgument): one tensor per model input, named by it, samples along dim 0, as many in
  // each. They serve as tensor files of the same rows would: the first `samples` calibrate, the
  // rest are held out, and the data key is a file's (a calibration cache written from a file
  // matches the same values in memory). One of another float type than its input's is converted
  // (a copy); the others are used in place: storage they view must outlive the QuantizeRun.
  std::vector<NamedTensor> calibration_tensors;
  std::string recipe;  // for images: a preset or recipe .json ("": the input's default)
  QuantizeOptions options;
  int64_t samples = 300;  // calibration samples used: a tensor file's first N, images spread out
  int64_t batch = 32;     // samples per calibration batch (and per evaluation run)
  // Calibration cache (JSON; Quantizer::UseCache); "": none, except with max_drop >= 0, which
  // uses a temporary one (removed with the QuantizeRun).
  std::string cache;
  std::string trt_cache;  // "": none; else also the TensorRT calibration table written there
  // Accuracy control: the most the held-out score may drop, in percentage points; < 0: off.
  double max_drop = -1;
  // For max_drop: a .npy of one int64/int32 class per row of the calibration tensor file; "":
  // the score is the argmax agreement (%) with float32.
  std::string labels;
  // Or the labels in memory: one int64/int32 class per calibration row (both it and `labels` is
  // InvalidArgument; an undefined tensor: none).
  Tensor labels_tensor;
  int64_t eval_samples = 1000;  // for max_drop: held-out rows scored at most (>= 1)
};

// Optional progress reports (an empty function reports nothing). Called on the caller's thread.
struct QuantizeProgress {
  // A status line to show in place, once per calibration batch: "calibration pass 1/2: 64/300
  // samples" (no newline; the next `note` ends it).
  std::function<void(const std::string&)> batch;
  // A whole line (no newline): the calibration data, the cache, each pass's end, images that
  // failed to decode.
  std::function<void(const std::string&)> note;
  // Accuracy control's report, as text to append as is: whole lines end in '\n'; the sensitivity
  // scan appends one '.' per node.
  std::function<void(const std::string&)> report;
  // Polled between calibration batches and between accuracy control's models: true stops the
  // work with Cancelled (job.out may then hold one of accuracy control's candidates).
  std::function<bool()> cancelled;
};

// The calibration samples of a job: rows of one tensor file (or in-memory tensor) per input, or
// images through a recipe. Holds the tensor files in memory (images are decoded per batch).
class CalibrationSamples {
 public:
  // Reads the sources of `job.calibrate` for a model with `inputs` (job.samples, job.recipe), or
  // takes job.calibration_tensors when job.calibrate is empty.
  static StatusOr<std::unique_ptr<CalibrationSamples>> Open(const QuantizeJob& job,
                                                            const std::vector<TensorSpec>& inputs);
  ~CalibrationSamples();
  int64_t count() const;  // samples used for calibration
  // The tensor when there is one tensor file (nullptr for images or several files).
  const Tensor* single() const;
  const std::string& key() const;   // identifies the data (Quantizer::UseCache)
  const std::string& what() const;  // "40 samples of 'calib.npy'", ...
  // job.calibrate; for in-memory tensors "tensor 'NAME'" each.
  const std::vector<std::string>& sources() const;
  // Samples [b, e) of every input; images that fail to decode are appended to `failures` when
  // it is not null (the batch then has fewer rows).
  StatusOr<std::vector<NamedTensor>> Batch(int64_t b, int64_t e,
                                           std::vector<std::string>* failures);
  // Up to `k` samples not used for calibration (rows after them; images next to them), or, when
  // there are none, the first k calibration samples; `held_out` says which.
  StatusOr<std::vector<NamedTensor>> HeldOut(int64_t k, bool* held_out);

 private:
  struct Impl;
  CalibrationSamples();
  std::unique_ptr<Impl> impl_;
};

// Runs every pass of `q` over the samples in batches of `batch`; images that fail (first pass)
// are appended to `failures`. An Observe error names the samples and sources; Cancelled when
// progress.cancelled says so.
Status Calibrate(CalibrationSamples* samples, Quantizer* q, int64_t batch,
                 std::vector<std::string>* failures, const QuantizeProgress& progress = {});

// A quantized model written by QuantizeWithCalibration. Owns its quantizer and samples, and the
// temporary calibration cache (removed by the destructor).
struct QuantizeRun {
  std::unique_ptr<Quantizer> quantizer;  // after Write
  std::unique_ptr<CalibrationSamples> samples;
  QuantizeSummary summary;
  std::vector<std::string> failed_images;  // calibration images that did not decode
  bool cache_hit = false;                  // ranges read from job.cache, no calibration
  std::string cache;                       // the cache used ("" for none)
  double seconds = 0;                      // calibration and writing, wall clock
  std::string temporary_cache;             // == cache when made for max_drop; removed at the end
  QuantizeRun() = default;
  QuantizeRun(const QuantizeRun&) = delete;
  QuantizeRun& operator=(const QuantizeRun&) = delete;
  ~QuantizeRun();
};

// Checks the job, opens the samples, calibrates (or reads job.cache) and writes job.out (and
// job.trt_cache). NotFound for a missing calibration file, InvalidArgument for calibration
// tensors that are scalars, not numbers, or of different sample counts, before the model is read;
// InvalidArgument when no calibration image decodes.
StatusOr<std::unique_ptr<QuantizeRun>> QuantizeWithCalibration(
    const QuantizeJob& job, const QuantizeProgress& progress = {});

// After QuantizeWithCalibration: Quantizer::Compare on job.batch held-out samples.
struct HeldOutComparison {
  bool held_out = false;  // false: there were none; the calibration samples were compared
  std::vector<LayerError> errors;
};
StatusOr<HeldOutComparison> CompareHeldOut(QuantizeRun* run, int64_t batch);

// Accuracy control (job.max_drop >= 0) on up to job.eval_samples rows of the one tensor file
// after the job.samples calibrated on. Each quantized node's sensitivity is measured alone (only
// it int8, on job.batch held-out rows: how far the argmax agreement with float32 falls); then
// the fewest most sensitive nodes are kept float (doubling, then bisection; each candidate
// re-quantized from the calibration cache, scored on every held-out row). Scores in percent.
struct AccuracyControlResult {
  int64_t eval_samples = 0;                // held-out rows scored
  std::string measure;                     // "top-1" or "argmax agreement with float32"
  double float_score = 0, int8_score = 0;  // before any node was kept float
  // Drop (percentage points) of each quantized node alone, most sensitive first; empty when the
  // first model was within the budget.
  std::vector<std::pair<std::string, double>> sensitivity;
  size_t kept_float = 0;  // most sensitive nodes kept float in job.out
  double drop = 0;        // job.out's score drop
};
// Rewrites job.out (and run->quantizer, run->summary) unless the first model is within the
// budget. InvalidArgument "--max-drop X not reached: it would keep every node float (...)" when
// only keeping every node float would reach it (job.out then holds the last candidate); also
// without held-out rows, with several inputs, or with labels (job.labels or job.labels_tensor)
// of the wrong count or type.
StatusOr<AccuracyControlResult> RunAccuracyControl(const QuantizeJob& job, QuantizeRun* run,
                                                   const QuantizeProgress& progress = {});

}  // namespace kiln
