// kiln's Python extension (`kiln._kiln`): nanobind bindings over the public C++ API
// (include/kiln/ only). The Python package (python/kiln/) builds the user-facing classes on these:
// kiln.Session subclasses _Session, kiln.Batcher wraps _Batcher.
//
// Arrays: an input that is already a C-contiguous CPU array (numpy, or any object with
// __dlpack__, such as a torch CPU tensor) of the input's dtype is read in place through a
// Tensor::View; anything else is converted once with numpy (same-kind casts only) and counted in
// stats()["inputs_copied"]. Outputs are numpy arrays over the Tensor the run returned (a capsule
// keeps it alive): no copy. The GIL is released while a model loads, plans and runs, so several
// Python threads can run one session at once (Session::Run is thread-safe).
//
// Errors: a kiln Status becomes the exception class of its code (kiln.InvalidArgument, ...),
// created here as subclasses of kiln.Error; the message is the Status's text.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/batcher.h"
#include "kiln/diagnostics.h"
#include "kiln/image_job.h"
#include "kiln/quantize.h"
#include "kiln/session.h"
#include "kiln/status.h"
#include "kiln/tensor.h"
#include "kiln/version.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {
namespace {

// ---- errors -------------------------------------------------------------------------------

// The Python exception classes, by StatusCode (index 0 is kiln.Error itself).
std::array<PyObject*, 11> g_errors{};

struct StatusError {
  Status status;
};

[[noreturn]] void Throw(const Status& s) { throw StatusError{s}; }
// The Python class of a Status's code (kiln.Error for one without its own).
PyObject* ErrorClass(const Status& s) {
  const int code = static_cast<int>(s.code());
  return code > 0 && code < static_cast<int>(g_errors.size()) && g_errors[code] ? g_errors[code]
                                                                                : g_errors[0];
}
void Check(const Status& s) {
  if (!s.ok()) Throw(s);
}
template <typename T>
T Take(StatusOr<T> v) {
  if (!v.ok()) Throw(v.status());
  return std::move(v).value();
}

// ---- text ---------------------------------------------------------------------------------
// Text crosses as UTF-8, with os.fsdecode's convention for bytes that are not UTF-8 (a model's
// names and strings are proto2 strings: any bytes): they come to Python as lone surrogates
// U+DC80..U+DCFF ("surrogateescape") and go back to the same bytes, so nothing fails to convert
// and nothing is lost.

// A Python str of kiln's text.
nb::str PyText(const std::string& text) {
  PyObject* o =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "surrogateescape");
  if (o == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(o);
}
// An error message as a Python str: bytes that are not UTF-8 shown as \xNN.
nb::str PyMessage(const std::string& text) {
  PyObject* o =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
  if (o == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(o);
}
std::string TypeName(nb::handle value) { return nb::cast<std::string>(nb::str(value.type())); }

// A user's str (`text` must be one) as kiln's text. One UTF-8 cannot encode (a surrogate that is
// not an escape of a byte) is InvalidArgument naming `what`; nb::cast would throw
// std::bad_cast, a bare RuntimeError.
std::string Utf8(nb::handle text, const std::string& what) {
  Py_ssize_t size = 0;
  if (const char* p = PyUnicode_AsUTF8AndSize(text.ptr(), &size))
    return std::string(p, static_cast<size_t>(size));
  PyErr_Clear();
  PyObject* b = PyUnicode_AsEncodedString(text.ptr(), "utf-8", "surrogateescape");
  if (b == nullptr) {
    PyErr_Clear();
    nb::object shown = nb::steal(PyObject_ASCII(text.ptr()));
    if (!shown.is_valid()) PyErr_Clear();
    Throw(InvalidArgument(what + " must be text UTF-8 can encode; got " +
                          (shown.is_valid() ? nb::cast<std::string>(shown) : std::string("?"))));
  }
  nb::bytes bytes = nb::steal<nb::bytes>(b);
  return std::string(bytes.c_str(), bytes.size());
}

void MakeErrors(nb::module_& m) {
  PyObject* base = PyErr_NewExceptionWithDoc(
      "kiln.Error", "Base of every error kiln raises; .code names the kind.", PyExc_RuntimeError,
      nullptr);
  g_errors[0] = base;
  m.attr("Error") = nb::handle(base);
  struct Kind {
    StatusCode code;
    const char* name;
    PyObject* also;  // a builtin class the error also is, for code that catches those
  };
  const Kind kinds[] = {
      {StatusCode::kInvalidArgument, "InvalidArgument", PyExc_ValueError},
      {StatusCode::kInvalidModel, "InvalidModel", nullptr},
      {StatusCode::kUnsupported, "Unsupported", nullptr},
      {StatusCode::kNotFound, "NotFound", nullptr},
      {StatusCode::kOutOfMemory, "OutOfMemory", PyExc_MemoryError},
      {StatusCode::kDeviceError, "DeviceError", nullptr},
      {StatusCode::kUnavailable, "Unavailable", nullptr},
      {StatusCode::kDeadlineExceeded, "DeadlineExceeded", PyExc_TimeoutError},
      {StatusCode::kCancelled, "Cancelled", nullptr},
      {StatusCode::kInternal, "Internal", nullptr},
  };
  for (const Kind& k : kinds) {
    PyObject* bases = k.also ? PyTuple_Pack(2, base, k.also) : PyTuple_Pack(1, base);
    const std::string qualified = std::string("kiln.") + k.name;
    PyObject* cls = PyErr_NewException(qualified.c_str(), bases, nullptr);
    Py_DECREF(bases);
    g_errors[static_cast<int>(k.code)] = cls;
    m.attr(k.name) = nb::handle(cls);
  }
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      PyErr_SetObject(ErrorClass(e.status), PyMessage(e.status.ToString()).ptr());
    }
  });
}

// ---- dtypes -------------------------------------------------------------------------------

struct DtypeRow {
  DataType kiln;
  nb::dlpack::dtype dl;
  const char* numpy;  // numpy's name
};
const DtypeRow kDtypes[] = {
    {DataType::kFloat, nb::dtype<float>(), "float32"},
    {DataType::kDouble, nb::dtype<double>(), "float64"},
    {DataType::kFloat16, {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1}, "float16"},
    {DataType::kUInt8, nb::dtype<uint8_t>(), "uint8"},
    {DataType::kInt8, nb::dtype<int8_t>(), "int8"},
    {DataType::kUInt16, nb::dtype<uint16_t>(), "uint16"},
    {DataType::kInt16, nb::dtype<int16_t>(), "int16"},
    {DataType::kInt32, nb::dtype<int32_t>(), "int32"},
    {DataType::kInt64, nb::dtype<int64_t>(), "int64"},
    {DataType::kUInt32, nb::dtype<uint32_t>(), "uint32"},
    {DataType::kUInt64, nb::dtype<uint64_t>(), "uint64"},
    {DataType::kBool, nb::dtype<bool>(), "bool"},
};

const DtypeRow* RowOf(DataType t) {
  for (const DtypeRow& r : kDtypes)
    if (r.kiln == t) return &r;
  return nullptr;
}
const DtypeRow* RowOf(nb::dlpack::dtype d) {
  for (const DtypeRow& r : kDtypes)
    if (r.dl == d) return &r;
  return nullptr;
}
// numpy's name of a kiln dtype ("" when numpy has none: bfloat16, string).
std::string NumpyName(DataType t) {
  const DtypeRow* r = RowOf(t);
  return r ? r->numpy : "";
}

// ---- arrays in and out ----------------------------------------------------------------------

using InArray = nb::ndarray<nb::ro, nb::device::cpu>;

// Whether nanobind may look at `value` as an array. nanobind 2.9's buffer-protocol import reads
// Py_buffer::strides without checking it for null, and numpy's datetime64 / timedelta64 scalars
// export a 1-d buffer without strides although PyBUF_STRIDES asks for them: casting one to an
// ndarray is a segfault. A buffer like that is no array to read in place (numpy converts it).
bool CastableToArray(nb::handle value) {
  if (!PyObject_CheckBuffer(value.ptr())) return true;  // __dlpack__ or nothing: no buffer read
  Py_buffer view;
  if (PyObject_GetBuffer(value.ptr(), &view, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();  // nanobind's own request fails the same way, cleanly
    return true;
  }
  const bool ok = view.ndim == 0 || (view.shape != nullptr && view.strides != nullptr);
  PyBuffer_Release(&view);
  return ok;
}

bool CContiguous(const InArray& a) {
  int64_t want = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != want) return false;
    want *= static_cast<int64_t>(a.shape(i));
  }
  return true;
}

// The inputs of one run: tensors viewing the callers' arrays (or the converted copies, kept here).
struct Feeds {
  std::vector<NamedTensor> tensors;
  std::vector<InArray> keep;  // the arrays the views read
  int copied = 0, in_place = 0;
};

const TensorSpec* FindSpec(const std::vector<TensorSpec>& specs, const std::string& name) {
  for (const TensorSpec& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

// numpy's array of a feed (np.asarray). What numpy, or the value's own __array__ or sequence
// protocol, raises on the way (a ragged list, an int too big for any dtype, a torch tensor in a
// tuple: ValueError, OverflowError, RuntimeError...) becomes InvalidArgument naming the input;
// MemoryError, and what is not an Exception (KeyboardInterrupt), pass as they are.
nb::object AsArray(nb::handle value, const std::string& name) {
  try {
    return nb::module_::import_("numpy").attr("asarray")(value);
  } catch (nb::python_error& e) {
    if (e.matches(PyExc_MemoryError) || !e.matches(PyExc_Exception)) throw;
    Throw(InvalidArgument("input '" + name + "': numpy cannot make an array of the " +
                          TypeName(value) + " given: " + e.what()));
  }
}

// One array feed of dtype `dtype`: in place when it is a C-contiguous CPU array of that dtype,
// else converted once by numpy (np.asarray(order="C") with a same-kind cast).
Tensor ArrayFeed(Feeds* f, DataType dtype, const std::string& name, nb::handle value) {
  InArray a;
  const bool is_array = CastableToArray(value) && nb::try_cast(value, a, /*convert=*/false);
  const DtypeRow* want = RowOf(dtype);
  if (want == nullptr)
    Throw(Unsupported("input '" + name + "' has dtype " + DataTypeName(dtype) +
                      ", which numpy cannot hold"));
  if (!(is_array && a.dtype() == want->dl && CContiguous(a))) {
    // Converted once: numpy decides what is an array; only same-kind casts (float64 -> float32,
    // int32 -> int64) are allowed, so a wrong kind of data is an error, not a silent cast.
    nb::module_ np = nb::module_::import_("numpy");
    nb::object source = AsArray(value, name);
    nb::object src_dtype = source.attr("dtype");
    if (nb::cast<std::string>(src_dtype.attr("kind")) == "O")
      Throw(InvalidArgument("input '" + name + "' must be an array of " + want->numpy + "; got " +
                            nb::cast<std::string>(nb::str(value.type()))));
    nb::object want_dtype = np.attr("dtype")(want->numpy);
    if (nb::cast<std::string>(src_dtype.attr("kind")) !=
            nb::cast<std::string>(want_dtype.attr("kind")) ||
        !nb::cast<bool>(np.attr("can_cast")(src_dtype, want_dtype, "same_kind")))
      Throw(InvalidArgument("input '" + name + "' must be " + want->numpy + "; got " +
                            nb::cast<std::string>(nb::str(src_dtype)) +
                            " (only conversions within a kind are made, e.g. float64 to "
                            "float32 or int32 to int64)"));
    // np.asarray with order="C", not np.ascontiguousarray: that one makes a 0-d array 1-d.
    nb::object converted = np.attr("asarray")(source, "dtype"_a = want->numpy, "order"_a = "C");
    if (!nb::try_cast(converted, a, false))
      Throw(Internal("input '" + name + "': numpy's conversion gave no readable array"));
    ++f->copied;
  } else {
    ++f->in_place;
  }
  Shape shape(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
  Tensor t = Tensor::View(dtype, std::move(shape), const_cast<void*>(a.data()));
  f->keep.push_back(std::move(a));
  return t;
}

// A feed of any kiln type: arrays; strings from a str/bytes/object array (each element str);
// sequences from a list or tuple of arrays; optionals from None or a value.
Tensor ValueFeed(Feeds* f, DataType dtype, const std::string& name, nb::handle value) {
  if (IsOptionalType(dtype)) {
    if (value.is_none()) return Tensor::Optional(ContainedType(dtype), nullptr);
    Tensor v = ValueFeed(f, ContainedType(dtype), name, value);
    return Tensor::Optional(ContainedType(dtype), &v);
  }
  if (IsSequenceType(dtype)) {
    if (!nb::isinstance<nb::list>(value) && !nb::isinstance<nb::tuple>(value))
      Throw(InvalidArgument("input '" + name + "' is a " + DataTypeName(dtype) +
                            ": give a list of arrays; got " +
                            nb::cast<std::string>(nb::str(value.type()))));
    std::vector<Tensor> items;
    for (nb::handle item : value) items.push_back(ValueFeed(f, ContainedType(dtype), name, item));
    return Tensor::Sequence(ContainedType(dtype), std::move(items));
  }
  if (dtype == DataType::kString) {
    nb::object arr = AsArray(value, name);
    nb::object arr_dtype = arr.attr("dtype");
    const std::string kind = nb::cast<std::string>(arr_dtype.attr("kind"));
    if (kind != "U" && kind != "S" && kind != "O")
      Throw(InvalidArgument("input '" + name + "' must be an array of str; got " +
                            nb::cast<std::string>(nb::str(arr_dtype))));
    Shape shape;
    for (nb::handle d : arr.attr("shape")) shape.push_back(nb::cast<int64_t>(d));
    Tensor t = Tensor::Strings(shape);
    int64_t i = 0;
    for (nb::handle e : arr.attr("ravel")().attr("tolist")()) {
      if (nb::isinstance<nb::bytes>(e))
        t.data<std::string>()[i++] = std::string(nb::cast<nb::bytes>(e).c_str(), nb::len(e));
      else if (nb::isinstance<nb::str>(e))
        t.data<std::string>()[i++] = Utf8(e, "input '" + name + "': element " + std::to_string(i));
      else
        Throw(InvalidArgument("input '" + name + "': element " + std::to_string(i) +
                              " is not a str; got " + nb::cast<std::string>(nb::str(e.type()))));
    }
    ++f->copied;
    return t;
  }
  return ArrayFeed(f, dtype, name, value);
}

void AddFeed(Feeds* f, const std::vector<TensorSpec>& specs, const std::string& name,
             nb::handle value) {
  const TensorSpec* spec = FindSpec(specs, name);
  if (spec == nullptr) {
    std::string known;
    for (const TensorSpec& s : specs) known += (known.empty() ? "'" : ", '") + s.name + "'";
    Throw(InvalidArgument("'" + name + "' is not an input of the model; its inputs are " + known));
  }
  f->tensors.push_back({name, ValueFeed(f, spec->dtype, name, value)});
}

Feeds ReadFeeds(const std::vector<TensorSpec>& specs, nb::handle feeds) {
  if (!nb::isinstance<nb::dict>(feeds))
    Throw(InvalidArgument("feeds must be a dict of input name to array; got " +
                          nb::cast<std::string>(nb::str(feeds.type()))));
  Feeds f;
  for (auto [k, v] : nb::borrow<nb::dict>(feeds)) {
    if (!nb::isinstance<nb::str>(k))
      Throw(InvalidArgument("feed names must be str; got " +
                            nb::cast<std::string>(nb::str(k.type()))));
    AddFeed(&f, specs, Utf8(k, "a feed name"), v);
  }
  return f;
}

// A numpy array that owns the tensor's storage (no copy). Strings: a numpy object array of str;
// sequences: a list; optionals: None or the value (as ONNX Runtime returns them).
nb::object ToNumpy(Tensor t) {
  if (IsSequenceType(t.dtype())) {
    nb::list l;
    for (const Tensor& item : t.items()) l.append(ToNumpy(item));
    return l;
  }
  if (IsOptionalType(t.dtype())) return t.has_element() ? ToNumpy(t.items()[0]) : nb::none();
  if (t.dtype() == DataType::kString) {
    nb::list l;
    for (int64_t i = 0; i < t.numel(); ++i) l.append(PyText(t.data<std::string>()[i]));
    nb::module_ np = nb::module_::import_("numpy");
    nb::list shape;
    for (int64_t d : t.shape()) shape.append(d);
    return np.attr("array")(l, "dtype"_a = "object").attr("reshape")(nb::tuple(shape));
  }
  const DtypeRow* row = RowOf(t.dtype());
  if (row == nullptr)
    Throw(Unsupported(std::string("an output of dtype ") + DataTypeName(t.dtype()) +
                      " cannot be returned as a numpy array"));
  auto* keep = new Tensor(std::move(t));
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(keep->shape().begin(), keep->shape().end());
  static char empty_storage[8] = {};
  void* data = keep->raw() != nullptr ? keep->raw() : empty_storage;  // 0 elements
  return nb::cast(
      nb::ndarray<nb::numpy>(data, shape.size(), shape.data(), owner, nullptr, row->dl));
}

nb::list ShapeList(const TensorSpec& s) {
  nb::list l;
  for (size_t i = 0; i < s.dims.size(); ++i) {
    if (s.dims[i] >= 0)
      l.append(s.dims[i]);
    else if (i < s.dim_names.size() && !s.dim_names[i].empty())
      l.append(PyText(s.dim_names[i]));
    else
      l.append(nb::none());
  }
  return l;
}

// ---- the session ----------------------------------------------------------------------------

struct PySession {
  std::unique_ptr<Session> session;
  std::atomic<uint64_t> runs{0}, inputs_copied{0}, inputs_in_place{0};

  const Session& s() const {
    if (!session) Throw(InvalidArgument("the session was not loaded"));
    return *session;
  }

  void Count(const Feeds& f) {
    ++runs;
    inputs_copied += f.copied;
    inputs_in_place += f.in_place;
  }

  nb::dict Run(nb::handle feeds, std::optional<std::vector<std::string>> names) {
    Feeds f = ReadFeeds(s().inputs(), feeds);
    std::vector<NamedTensor> outs;
    Status st;
    {
      nb::gil_scoped_release release;
      st = s().Run(f.tensors, &outs);
    }
    Check(st);
    Count(f);
    nb::dict result;
    if (names) {
      for (const std::string& n : *names) {
        bool found = false;
        for (NamedTensor& o : outs)
          if (o.name == n && o.tensor.defined()) {
            result[PyText(n)] = ToNumpy(std::move(o.tensor));
            o.tensor = Tensor();
            found = true;
          }
        if (!found && !result.contains(PyText(n)))
          Throw(InvalidArgument("'" + n + "' is not an output of the model"));
      }
    } else {
      for (NamedTensor& o : outs) result[PyText(o.name)] = ToNumpy(std::move(o.tensor));
    }
    return result;
  }

  void RunInto(nb::handle feeds, nb::handle outputs) {
    Feeds f = ReadFeeds(s().inputs(), feeds);
    if (!nb::isinstance<nb::dict>(outputs))
      Throw(InvalidArgument("outputs must be a dict of output name to a preallocated array"));
    std::vector<NamedTensor> bound;
    std::vector<nb::ndarray<nb::device::cpu>> keep;
    for (auto [k, v] : nb::borrow<nb::dict>(outputs)) {
      if (!nb::isinstance<nb::str>(k))
        Throw(InvalidArgument("output names must be str; got " + TypeName(k)));
      const std::string name = Utf8(k, "an output name");
      const TensorSpec* spec = FindSpec(s().outputs(), name);
      if (spec == nullptr) Throw(InvalidArgument("'" + name + "' is not an output of the model"));
      nb::ndarray<nb::device::cpu> a;
      if (!CastableToArray(v) || !nb::try_cast(v, a, false))
        Throw(InvalidArgument("output '" + name + "' must be a writable CPU array"));
      const DtypeRow* row = RowOf(spec->dtype);
      if (row == nullptr || !(a.dtype() == row->dl))
        Throw(InvalidArgument("output '" + name + "' must be a " +
                              (row ? row->numpy : DataTypeName(spec->dtype)) + " array"));
      int64_t want = 1;
      for (size_t i = a.ndim(); i-- > 0;) {
        if (a.shape(i) != 1 && a.stride(i) != want)
          Throw(InvalidArgument("output '" + name + "' must be C-contiguous"));
        want *= static_cast<int64_t>(a.shape(i));
      }
      Shape shape(a.ndim());
      for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
      bound.push_back({name, Tensor::View(spec->dtype, std::move(shape), a.data())});
      keep.push_back(std::move(a));
    }
    Status st;
    {
      nb::gil_scoped_release release;
      st = s().RunInto(f.tensors, &bound);
    }
    Check(st);
    Count(f);
  }

  void Prepare(nb::dict shapes) {
    std::vector<std::pair<std::string, Shape>> list;
    for (auto [k, v] : shapes) {
      if (!nb::isinstance<nb::str>(k))
        Throw(InvalidArgument("prepare: shapes are keyed by input name (str); got " + TypeName(k)));
      std::vector<int64_t> dims;
      if (nb::isinstance<nb::str>(v) || !nb::try_cast(v, dims))
        Throw(InvalidArgument("prepare: the shape of '" + Utf8(k, "an input name") +
                              "' must be a list of ints; got " + TypeName(v)));
      list.emplace_back(Utf8(k, "an input name"), std::move(dims));
    }
    Status st;
    {
      nb::gil_scoped_release release;
      st = s().Prepare(list);
    }
    Check(st);
  }

  // The C++ baseline of bench/python_bench.py: `iterations` RunInto calls into preallocated
  // outputs, timed in C++ with the GIL released (no Python in the loop); microseconds per call.
  // `runs` runs timed per step, written to `path` as Chrome/Perfetto trace JSON; returns the
  // runs' wall times (ms).
  // `runs` Run calls timed in C++ (ms each), with every step timed when `per_node`: the same
  // calls either way, so the two differ only by the tracing (bench/trace_overhead.py).
  Status TimedRuns(const Feeds& f, int runs, bool per_node, std::vector<double>* ms,
                   std::vector<RunTimings>* traced) {
    for (int i = 0; i < runs; ++i) {
      RunTimings rt;
      rt.per_node = per_node;
      std::vector<NamedTensor> outs;
      const auto t0 = std::chrono::steady_clock::now();
      KILN_RETURN_IF_ERROR(s().Run(f.tensors, &outs, &rt));
      ms->push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (!per_node) continue;
      if (rt.nodes.empty())
        return Unsupported("trace: per-step times are measured on the CPU backend only");
      traced->push_back(std::move(rt));
    }
    return OkStatus();
  }

  // `runs` runs timed per step, written to `path` as Chrome/Perfetto trace JSON; returns the
  // runs' wall times (ms).
  std::vector<double> Trace(nb::handle feeds, const std::string& path, int runs) {
    if (runs < 1) Throw(InvalidArgument("runs must be >= 1; got " + std::to_string(runs)));
    Feeds f = ReadFeeds(s().inputs(), feeds);
    std::vector<double> ms;
    Status st;
    {
      nb::gil_scoped_release release;
      st = [&]() -> Status {
        std::vector<RunTimings> traced;
        KILN_RETURN_IF_ERROR(TimedRuns(f, runs, true, &ms, &traced));
        std::ofstream out(path);
        out << ChromeTraceJson(traced, "kiln (Python)");
        if (!out.good()) return InvalidArgument("cannot write trace file '" + path + "'");
        return OkStatus();
      }();
    }
    Check(st);
    return ms;
  }

  // The untraced twin of Trace's runs: bench/trace_overhead.py's baseline.
  std::vector<double> TimeRuns(nb::handle feeds, int runs) {
    if (runs < 1) Throw(InvalidArgument("runs must be >= 1; got " + std::to_string(runs)));
    Feeds f = ReadFeeds(s().inputs(), feeds);
    std::vector<double> ms;
    Status st;
    {
      nb::gil_scoped_release release;
      st = TimedRuns(f, runs, false, &ms, nullptr);
    }
    Check(st);
    return ms;
  }

  std::vector<double> TimeRunInto(nb::handle feeds, int iterations) {
    Feeds f = ReadFeeds(s().inputs(), feeds);
    std::vector<double> us;
    Status st;
    {
      nb::gil_scoped_release release;
      st = [&]() -> Status {
        std::vector<NamedTensor> outs;
        KILN_RETURN_IF_ERROR(s().Run(f.tensors, &outs));
        std::vector<NamedTensor> bound;
        for (const NamedTensor& o : outs)
          bound.push_back({o.name, Tensor::Empty(o.tensor.dtype(), o.tensor.shape())});
        us.reserve(static_cast<size_t>(std::max(iterations, 0)));
        for (int i = 0; i < iterations; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          KILN_RETURN_IF_ERROR(s().RunInto(f.tensors, &bound));
          us.push_back(
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                  .count());
        }
        return OkStatus();
      }();
    }
    Check(st);
    return us;
  }

  nb::dict Stats() const {
    const SessionStats st = s().stats();
    nb::dict d;
    d["runs"] = runs.load();
    d["inputs_copied"] = inputs_copied.load();
    d["inputs_in_place"] = inputs_in_place.load();
    d["plans"] = st.plans;
    d["plans_evicted"] = st.plans_evicted;
    d["planned_arena_bytes_max"] = st.planned_arena_bytes_max;
    d["packed_weight_bytes"] = st.packed_weight_bytes;
    d["device_constant_bytes"] = st.device_constant_bytes;
    d["packed_weights"] = st.packed_weights;
    d["packed_weight_reuses"] = st.packed_weight_reuses;
    d["arena_bytes"] = st.arena_bytes;
    d["arenas"] = st.arenas;
    d["constant_bytes"] = st.constant_bytes;
    d["weights_shared"] = st.weights_shared;
    return d;
  }
};

// A model given as bytes (or bytearray/memoryview) or as a path (str or os.PathLike).
void ModelArgs(nb::handle model, std::string* path, std::string* bytes) {
  if (nb::isinstance<nb::bytes>(model)) {
    nb::bytes b = nb::borrow<nb::bytes>(model);
    bytes->assign(b.c_str(), b.size());
  } else if (PyByteArray_Check(model.ptr()) || PyMemoryView_Check(model.ptr())) {
    nb::bytes b = nb::steal<nb::bytes>(PyBytes_FromObject(model.ptr()));
    if (!b.is_valid()) throw nb::python_error();
    bytes->assign(b.c_str(), b.size());
  } else {
    nb::module_ os = nb::module_::import_("os");
    nb::object fs = os.attr("fspath")(model);
    if (!nb::isinstance<nb::str>(fs))
      Throw(InvalidArgument("a model path must be str or os.PathLike of str"));
    // The file system's bytes of the name (os.fsencode), so a name that is not UTF-8 (decoded
    // by Python with surrogate escapes) opens the file it names.
    nb::bytes b = nb::borrow<nb::bytes>(os.attr("fsencode")(fs));
    *path = std::string(b.c_str(), b.size());
    if (path->empty()) Throw(InvalidArgument("the model path is empty"));
    if (path->find('\0') != std::string::npos)
      Throw(InvalidArgument("the model path holds a NUL character"));
  }
}

void InitSession(PySession* self, nb::handle model, const std::string& backend, int device_index,
                 const std::string& precision, int threads, bool optimize,
                 std::vector<std::string> disabled_passes, bool reference_only, bool tune,
                 const std::string& plan_cache_dir, size_t max_plans, bool cuda_graph,
                 bool pinned_staging, bool share_weights) {
  SessionOptions o;
  auto parsed_backend = ParseBackend(backend);
  if (!parsed_backend.ok()) Throw(parsed_backend.status());
  o.backend = *parsed_backend;
  o.device_index = device_index;
  auto parsed = ParsePrecision(precision);
  if (!parsed.ok()) Throw(parsed.status());
  o.precision = *parsed;
  o.num_threads = threads;
  o.optimize = optimize;
  o.disabled_passes = std::move(disabled_passes);
  o.reference_only = reference_only;
  o.tune = tune;
  o.plan_cache_dir = plan_cache_dir;
  o.max_plans = max_plans;
  o.cuda_graph = cuda_graph;
  o.pinned_staging = pinned_staging;
  o.share_weights = share_weights;
  std::string path, bytes;
  ModelArgs(model, &path, &bytes);
  StatusOr<std::unique_ptr<Session>> s = InvalidArgument("unset");
  {
    nb::gil_scoped_release release;
    s = path.empty() ? Session::LoadFromBytes(bytes, o) : Session::Load(path, o);
  }
  std::unique_ptr<Session> loaded = Take(std::move(s));  // throws before the object exists
  new (self) PySession();
  self->session = std::move(loaded);
}

nb::list Specs(const std::vector<TensorSpec>& specs) {
  nb::list l;
  for (const TensorSpec& s : specs) {
    nb::dict d;
    d["name"] = PyText(s.name);
    d["dtype"] = NumpyName(s.dtype);
    d["kiln_dtype"] = DataTypeName(s.dtype);
    d["shape"] = s.rank_known ? nb::object(ShapeList(s)) : nb::none();
    l.append(d);
  }
  return l;
}

nb::dict Metadata(const ModelMetadata& m) {
  nb::dict d;
  d["producer_name"] = PyText(m.producer_name);
  d["producer_version"] = PyText(m.producer_version);
  d["domain"] = PyText(m.domain);
  d["model_version"] = m.model_version;
  d["doc_string"] = PyText(m.doc_string);
  d["graph_name"] = PyText(m.graph_name);
  d["graph_doc_string"] = PyText(m.graph_doc_string);
  d["ir_version"] = m.ir_version;
  nb::list opsets;
  for (const auto& [domain, version] : m.opset_imports)
    opsets.append(nb::make_tuple(PyText(domain), version));
  d["opset_imports"] = opsets;
  nb::dict custom;
  for (const auto& [k, v] : m.custom) custom[PyText(k)] = PyText(v);
  d["custom"] = custom;
  return d;
}

// ---- the batcher ----------------------------------------------------------------------------

struct PyBatcher {
  nb::object session_ref;  // keeps the Python session (and its Session) alive
  std::unique_ptr<DynamicBatcher> batcher;
  const PySession* session = nullptr;

  DynamicBatcher& b() {
    if (!batcher) Throw(Unavailable("the batcher was closed"));
    return *batcher;
  }

  nb::dict Infer(nb::handle feeds) {
    Feeds f = ReadFeeds(session->s().inputs(), feeds);
    std::vector<NamedTensor> outs;
    Status st;
    {
      nb::gil_scoped_release release;
      st = b().Infer(std::move(f.tensors), &outs);
    }
    Check(st);
    nb::dict result;
    for (NamedTensor& o : outs) result[PyText(o.name)] = ToNumpy(std::move(o.tensor));
    return result;
  }

  // Queues the request; `future` (a concurrent.futures.Future) gets the outputs dict or the
  // exception, from the batcher's worker thread.
  void Submit(nb::handle feeds, nb::object future) {
    auto f = std::make_shared<Feeds>(ReadFeeds(session->s().inputs(), feeds));
    auto fut = std::make_shared<nb::object>(std::move(future));
    auto done = [f, fut](Status st, std::vector<NamedTensor> outs) {
      nb::gil_scoped_acquire acquire;
      try {
        if (!st.ok()) {
          nb::object exc =
              nb::steal(PyObject_CallOneArg(ErrorClass(st), PyMessage(st.ToString()).ptr()));
          if (!exc.is_valid()) throw nb::python_error();
          fut->attr("set_exception")(exc);
        } else {
          nb::dict result;
          for (NamedTensor& o : outs) result[PyText(o.name)] = ToNumpy(std::move(o.tensor));
          fut->attr("set_result")(result);
        }
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("kiln.Batcher: setting a request's result");
      } catch (...) {
      }
      f->keep.clear();  // the arrays are released with the GIL held
      *fut = nb::object();
    };
    std::vector<NamedTensor> tensors = f->tensors;
    Status st;
    {
      nb::gil_scoped_release release;
      st = b().Submit(std::move(tensors), done);
    }
    Check(st);
  }

  void Close() {
    if (batcher) {
      nb::gil_scoped_release release;
      batcher->Shutdown();
      batcher.reset();
    }
  }

  nb::dict Stats() {
    const BatcherStats st = b().stats();
    nb::dict d;
    d["requests"] = st.requests;
    d["rejected"] = st.rejected;
    d["expired"] = st.expired;
    d["failed"] = st.failed;
    d["batches"] = st.batches;
    d["batched_samples"] = st.batched_samples;
    d["queued"] = st.queued;
    d["busy"] = st.busy;
    d["queue_us_total"] = st.queue_us_total;
    d["compute_us_total"] = st.compute_us_total;
    return d;
  }
};

// ---- quantize, image job, doctor -----------------------------------------------------------

// kiln.quantize's progress callable (kind, text) behind QuantizeProgress, called with the GIL
// held (the pipeline runs without it). What it raises is kept, not thrown through the library:
// `cancelled` then stops the pipeline at its next batch or model, and Rethrow raises it once the
// pipeline returned. Ctrl-C (a pending signal) stops it likewise.
struct QuantizeCallbacks {
  std::optional<nb::callable> fn;
  std::optional<nb::python_error> error;

  QuantizeProgress Progress() {
    QuantizeProgress p;
    if (fn) {
      p.batch = [this](const std::string& text) { Call("batch", text); };
      p.note = [this](const std::string& text) { Call("note", text); };
      p.report = [this](const std::string& text) { Call("report", text); };
    }
    p.cancelled = [this] {
      nb::gil_scoped_acquire acquire;
      if (!error && PyErr_CheckSignals() != 0) error.emplace();  // takes the raised exception
      return error.has_value();
    };
    return p;
  }
  void Call(const char* kind, const std::string& text) {
    nb::gil_scoped_acquire acquire;
    if (error) return;  // the pipeline stops at its next check
    try {
      (*fn)(kind, PyMessage(text));
    } catch (nb::python_error& e) {
      error.emplace(std::move(e));
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      error.emplace();
    }
  }
  // With the GIL held, after the pipeline returned.
  void Rethrow() {
    if (error) {
      nb::python_error e = std::move(*error);
      error.reset();
      throw e;
    }
  }
};

nb::dict ActivationDict(const QuantizedActivation& a) {
  nb::dict d;
  d["tensor"] = PyText(a.tensor);
  d["dtype"] = a.dtype;
  d["scale"] = a.scale;
  d["zero_point"] = a.zero_point;
  d["min"] = a.min;
  d["max"] = a.max;
  d["threshold"] = a.threshold;
  d["method"] = a.method;
  nb::list channel_scales;
  for (float v : a.channel_scales) channel_scales.append(v);
  d["channel_scales"] = channel_scales;
  return d;
}

nb::dict QuantizeSummaryDict(const QuantizeRun& run) {
  const QuantizeSummary& summary = run.summary;
  nb::dict d;
  d["method"] = summary.method;
  d["samples"] = summary.samples;
  nb::list quantized;
  for (const std::string& node : summary.quantized_nodes) quantized.append(PyText(node));
  d["quantized_nodes"] = quantized;
  nb::dict kept;
  for (const auto& [node, why] : summary.float_nodes) kept[PyText(node)] = PyMessage(why);
  d["float_nodes"] = kept;
  d["model_bytes"] = summary.model_bytes;
  d["bias_corrected"] = summary.bias_corrected;
  d["seconds"] = run.seconds;
  d["cache_hit"] = run.cache_hit;
  nb::list failed;
  for (const std::string& path : run.failed_images) failed.append(PyText(path));
  d["failed_images"] = failed;
  nb::list activations;
  for (const QuantizedActivation& a : summary.activations) activations.append(ActivationDict(a));
  d["activations"] = activations;
  return d;
}

nb::dict ComparisonDict(const HeldOutComparison& c) {
  nb::dict d;
  d["held_out"] = c.held_out;
  nb::list layers;
  for (const LayerError& e : c.errors) {
    nb::dict l;
    l["node"] = PyText(e.node);
    l["tensor"] = PyText(e.tensor);
    l["cosine"] = e.cosine;
    l["max_abs"] = e.max_abs;
    l["max_ref"] = e.max_ref;
    layers.append(l);
  }
  d["layers"] = layers;
  return d;
}

nb::dict AccuracyDict(const AccuracyControlResult& r) {
  nb::dict d;
  d["eval_samples"] = r.eval_samples;
  d["measure"] = r.measure;
  d["float_score"] = r.float_score;
  d["int8_score"] = r.int8_score;
  nb::list sensitivity;
  for (const auto& [node, drop] : r.sensitivity)
    sensitivity.append(nb::make_tuple(PyText(node), drop));
  d["sensitivity"] = sensitivity;
  d["kept_float"] = r.kept_float;
  d["drop"] = r.drop;
  return d;
}

using LabelsArray = nb::ndarray<nb::ro, int64_t, nb::c_contig, nb::device::cpu>;

// kiln.quantize: QuantizeWithCalibration, then CompareHeldOut (compare) and RunAccuracyControl
// (max_drop), the pipeline of `kiln quantize`. The calibration data is `calibrate` (the
// --calibrate forms: paths, NAME=FILE) or `calibration` ({input: array} items, read as feeds:
// in place where they can be, the job's tensors view them), not both. samples: none means all
// rows of the arrays, or 300 (the CLI's default) of files; batch <= 0: every sample in one.
nb::dict QuantizeModel(const std::string& model, const std::string& out,
                       std::vector<std::string> calibrate,
                       std::vector<std::pair<std::string, nb::object>> calibration,
                       const std::string& method, double percentile, int64_t batch,
                       std::vector<std::string> keep_float, bool quantize_all, bool bias_correction,
                       bool channel_activations, int threads, std::optional<int64_t> samples,
                       const std::string& recipe, const std::string& cache,
                       const std::string& trt_cache, std::optional<double> max_drop,
                       const std::string& labels, std::optional<LabelsArray> labels_array,
                       int64_t eval_samples, bool compare, std::optional<nb::callable> progress) {
  QuantizeJob job;
  job.model = model;
  job.out = out;
  job.calibrate = std::move(calibrate);
  job.recipe = recipe;
  job.options.method = method;
  job.options.percentile = percentile;
  job.options.keep_float = std::move(keep_float);
  job.options.quantize_all = quantize_all;
  job.options.bias_correction = bias_correction;
  job.options.channel_activations = channel_activations;
  job.options.num_threads = threads;
  job.cache = cache;
  job.trt_cache = trt_cache;
  if (max_drop) {
    if (!(*max_drop >= 0))  // NaN too
      Throw(InvalidArgument("max_drop must be >= 0 (percentage points); got " +
                            std::to_string(*max_drop)));
    job.max_drop = *max_drop;
  }
  job.labels = labels;
  if (labels_array) {
    const LabelsArray& a = *labels_array;
    Shape shape(a.ndim());
    for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
    job.labels_tensor = Tensor::Empty(DataType::kInt64, shape);
    if (a.size() > 0) std::memcpy(job.labels_tensor.raw(), a.data(), a.size() * sizeof(int64_t));
  }
  job.eval_samples = eval_samples;
  // In-memory samples: the arrays as the model's inputs take them (its specs say how).
  Feeds feeds;
  if (!calibration.empty()) {
    StatusOr<std::unique_ptr<Session>> loaded = InvalidArgument("unset");
    {
      nb::gil_scoped_release release;
      loaded = Session::Load(model);
    }
    const std::vector<TensorSpec> specs = Take(std::move(loaded))->inputs();
    nb::dict d;
    for (auto& [name, value] : calibration) d[PyText(name)] = value;
    feeds = ReadFeeds(specs, d);
    job.calibration_tensors = feeds.tensors;
  }
  if (samples) {
    job.samples = *samples;
  } else if (!job.calibration_tensors.empty()) {  // all rows (a scalar is refused later)
    const Tensor& t = job.calibration_tensors[0].tensor;
    job.samples = t.rank() > 0 ? std::max<int64_t>(1, t.shape()[0]) : 1;
  }
  job.batch = batch > 0 ? batch : job.samples;

  QuantizeCallbacks callbacks{std::move(progress), std::nullopt};
  const QuantizeProgress p = callbacks.Progress();
  std::unique_ptr<QuantizeRun> run;
  std::optional<HeldOutComparison> comparison;
  std::optional<AccuracyControlResult> accuracy;
  Status st;
  {
    nb::gil_scoped_release release;
    st = [&]() -> Status {
      KILN_ASSIGN_OR_RETURN(run, QuantizeWithCalibration(job, p));
      if (compare) {
        if (p.cancelled()) return OkStatus();
        KILN_ASSIGN_OR_RETURN(comparison, CompareHeldOut(run.get(), job.batch));
      }
      if (job.max_drop >= 0) {
        if (p.cancelled()) return OkStatus();
        KILN_ASSIGN_OR_RETURN(accuracy, RunAccuracyControl(job, run.get(), p));
      }
      return OkStatus();
    }();
  }
  std::optional<nb::dict> d;
  if (st.ok() && !callbacks.error) {
    d = QuantizeSummaryDict(*run);
    if (comparison) (*d)["comparison"] = ComparisonDict(*comparison);
    if (accuracy) (*d)["accuracy"] = AccuracyDict(*accuracy);
  }
  {
    nb::gil_scoped_release release;
    run.reset();  // also removes accuracy control's temporary calibration cache
  }
  callbacks.Rethrow();  // what the callback raised (or Ctrl-C) comes first
  Check(st);
  return *d;
}

nb::dict RunImageJob(PySession& session, const std::string& images, const std::string& out,
                     const std::string& recipe, const std::string& labels, int batch, int workers,
                     int top_k, bool resume, const std::string& shard, int shards,
                     std::optional<nb::callable> progress) {
  ImageJobOptions o;
  o.images = images;
  o.out = out;
  o.recipe = recipe;
  o.labels = labels;
  o.batch = batch;
  o.workers = workers;
  o.top_k = top_k;
  o.resume = resume;
  o.shard = shard;
  o.shards = shards;
  StatusOr<ImageJobSummary> summary = InvalidArgument("unset");
  {
    nb::gil_scoped_release release;
    auto job = ImageJob::Create(session.s(), o);
    if (!job.ok()) {
      summary = job.status();
    } else {
      std::function<void(const ImageJobProgress&)> cb;
      if (progress) {
        cb = [&progress](const ImageJobProgress& p) {
          nb::gil_scoped_acquire acquire;
          (*progress)(p.done, p.total, p.failed, p.elapsed_s);
        };
      }
      summary = (*job)->Run(cb);
    }
  }
  ImageJobSummary s = Take(std::move(summary));
  nb::dict d;
  d["done"] = s.done;
  d["ok"] = s.ok;
  d["failed"] = s.failed;
  d["skipped"] = s.skipped;
  d["work_s"] = s.work_s;
  d["images_per_s"] = s.images_per_s;
  d["steady_images_per_s"] = s.steady_images_per_s;
  d["records"] = s.records;
  return d;
}

// ---- image decoding (kiln.ImageDecoder, kiln.ray) -------------------------------------------

// The images of one call as numpy floats [n, *sample] and one error text per image ("" for OK).
nb::tuple DecodedBatch(Tensor batch, const std::vector<Status>& statuses) {
  nb::list errors;
  for (const Status& s : statuses) errors.append(s.ok() ? nb::str("") : PyMessage(s.ToString()));
  return nb::make_tuple(ToNumpy(std::move(batch)), errors);
}

class PyImageDecoder {
 public:
  PyImageDecoder(const std::string& recipe, const std::vector<int64_t>& input_dims, int threads) {
    TensorSpec spec;
    spec.name = "input";
    spec.dtype = DataType::kFloat;
    spec.dims = input_dims;
    spec.rank_known = true;
    nb::gil_scoped_release release;
    d_ = Take(ImageBatchDecoder::Create(recipe, spec, threads));
  }
  ImageBatchDecoder& d() { return *d_; }

  Tensor NewBatch(size_t n) {
    Shape shape = {static_cast<int64_t>(n)};
    for (int64_t v : d_->sample_shape()) shape.push_back(v);
    return Tensor::Empty(DataType::kFloat, shape);
  }

  // bytes-like objects (bytes, bytearray, memoryview of bytes, numpy uint8 arrays).
  nb::tuple Decode(const nb::list& images) {
    std::vector<std::span<const uint8_t>> spans;
    std::vector<Py_buffer> views(nb::len(images));
    size_t got = 0;
    auto release_views = [&] {
      for (size_t i = 0; i < got; ++i) PyBuffer_Release(&views[i]);
    };
    for (size_t i = 0; i < views.size(); ++i) {
      if (PyObject_GetBuffer(images[i].ptr(), &views[i], PyBUF_C_CONTIGUOUS) != 0) {
        release_views();
        throw nb::python_error();
      }
      ++got;
      spans.emplace_back(static_cast<const uint8_t*>(views[i].buf),
                         static_cast<size_t>(views[i].len));
    }
    Tensor batch = NewBatch(spans.size());
    std::vector<Status> statuses;
    {
      nb::gil_scoped_release release;
      statuses = d_->Decode(spans, batch.data<float>());
    }
    release_views();
    return DecodedBatch(std::move(batch), statuses);
  }

  // uint8 arrays [H, W] or [H, W, C] (C 1 or 3), C-contiguous.
  nb::tuple Transform(const std::vector<nb::ndarray<nb::ro, uint8_t, nb::device::cpu>>& images) {
    std::vector<ImageBatchDecoder::Pixels> pixels;
    for (const auto& a : images) {
      ImageBatchDecoder::Pixels p;
      const bool contiguous = a.ndim() == 2   ? a.stride(1) == 1 && a.stride(0) == a.shape(1)
                              : a.ndim() == 3 ? a.stride(2) == 1 && a.stride(1) == a.shape(2) &&
                                                    a.stride(0) == a.shape(1) * a.shape(2)
                                              : false;
      if (contiguous) {
        p.data = a.data();
        p.height = static_cast<int>(a.shape(0));
        p.width = static_cast<int>(a.shape(1));
        p.channels = a.ndim() == 3 ? static_cast<int>(a.shape(2)) : 1;
      } else {  // left null: Transform reports the image as bad
        p.height = a.ndim() >= 1 ? static_cast<int>(a.shape(0)) : 0;
        p.width = a.ndim() >= 2 ? static_cast<int>(a.shape(1)) : 0;
        p.channels = a.ndim() == 3 ? static_cast<int>(a.shape(2)) : (a.ndim() == 2 ? 1 : 0);
      }
      pixels.push_back(p);
    }
    Tensor batch = NewBatch(pixels.size());
    std::vector<Status> statuses;
    {
      nb::gil_scoped_release release;
      statuses = d_->Transform(pixels, batch.data<float>());
    }
    return DecodedBatch(std::move(batch), statuses);
  }

 private:
  std::unique_ptr<ImageBatchDecoder> d_;
};

// Top-k classes per row of a float32 [n, classes] array: (int64 [n, k], float32 [n, k]).
nb::tuple TopK(const nb::ndarray<nb::ro, float, nb::ndim<2>, nb::c_contig, nb::device::cpu>& scores,
               int k) {
  if (k < 1) Throw(InvalidArgument("top_k must be >= 1; got " + std::to_string(k)));
  const int64_t n = static_cast<int64_t>(scores.shape(0));
  const int64_t classes = static_cast<int64_t>(scores.shape(1));
  const int64_t kk = std::min<int64_t>(k, classes);
  Tensor idx = Tensor::Empty(DataType::kInt64, {n, kk});
  Tensor val = Tensor::Empty(DataType::kFloat, {n, kk});
  if (kk > 0) {  // no classes: empty results, whatever the number of rows (2**40 of none)
    nb::gil_scoped_release release;
    std::vector<int64_t> top;
    std::vector<float> sc;
    for (int64_t i = 0; i < n; ++i) {
      TopKClasses(scores.data() + i * classes, classes, k, &top, &sc);
      std::copy(top.begin(), top.end(), idx.data<int64_t>() + i * kk);
      std::copy(sc.begin(), sc.end(), val.data<float>() + i * kk);
    }
  }
  return nb::make_tuple(ToNumpy(std::move(idx)), ToNumpy(std::move(val)));
}

}  // namespace
}  // namespace kiln::python

NB_MODULE(_kiln, m) {
  using namespace kiln;
  using namespace kiln::python;
  m.doc() = "kiln's native layer; use the `kiln` package, not this module.";
  m.attr("__version__") = KILN_VERSION_TEXT;
  MakeErrors(m);

  nb::class_<PySession>(m, "_Session")
      .def("__init__", &InitSession, "model"_a, "backend"_a = "cpu", "device_index"_a = 0,
           "precision"_a = "fp32", "threads"_a = 0, "optimize"_a = true,
           "disabled_passes"_a = std::vector<std::string>(), "reference_only"_a = false,
           "tune"_a = false, "plan_cache_dir"_a = "", "max_plans"_a = 64, "cuda_graph"_a = false,
           "pinned_staging"_a = true, "share_weights"_a = true)
      .def("run", &PySession::Run, "feeds"_a, "outputs"_a = nb::none(),
           "Runs the model: feeds maps input names to arrays; returns {output name: array}.")
      .def("__call__", &PySession::Run, "feeds"_a, "outputs"_a = nb::none())
      .def("run_into", &PySession::RunInto, "feeds"_a, "outputs"_a,
           "Runs the model into preallocated C-contiguous arrays of the outputs' dtypes and "
           "shapes ({output name: array}); outputs not named are computed and dropped.")
      .def("prepare", &PySession::Prepare, "shapes"_a,
           "Plans for these input shapes now ({input name: shape}), so the first run of them "
           "costs what later ones do.")
      .def("stats", &PySession::Stats)
      .def("_trace", &PySession::Trace, "feeds"_a, "path"_a, "runs"_a)
      .def("_time_runs", &PySession::TimeRuns, "feeds"_a, "runs"_a,
           "Run timed in a C++ loop (ms per call), as _trace times its runs, untraced.")
      .def("_time_run_into", &PySession::TimeRunInto, "feeds"_a, "iterations"_a,
           "C++ RunInto timed in a C++ loop (microseconds per call): bench/python_bench.py's "
           "baseline for the cost of a call from Python.")
      .def("_input_specs", [](const PySession& s) { return Specs(s.s().inputs()); })
      .def("_output_specs", [](const PySession& s) { return Specs(s.s().outputs()); })
      .def("_metadata", [](const PySession& s) { return Metadata(s.s().metadata()); })
      .def("device_description", [](const PySession& s) { return s.s().device_description(); })
      .def("optimized_op_counts",
           [](const PySession& s) {
             nb::list l;
             for (const auto& [op, n] : s.s().optimized_op_counts())
               l.append(nb::make_tuple(PyText(op), n));
             return l;
           })
      .def("optimization_log",
           [](const PySession& s) {
             nb::list l;
             for (const std::string& line : s.s().optimization_log()) l.append(PyMessage(line));
             return l;
           })
      .def("describe_plan", [](PySession& s, nb::handle feeds) {
        Feeds f = ReadFeeds(s.s().inputs(), feeds);
        StatusOr<std::string> text = InvalidArgument("unset");
        {
          nb::gil_scoped_release release;
          text = s.s().DescribePlan(f.tensors);
        }
        return PyMessage(Take(std::move(text)));
      });

  nb::class_<PyBatcher>(m, "_Batcher")
      .def(
          "__init__",
          [](PyBatcher* self, nb::object session, int max_batch, int64_t max_queue_delay_us,
             std::vector<int> preferred_sizes, size_t max_queue, bool merge) {
            // Everything that can throw comes first: nanobind does not destroy an object
            // whose __init__ threw, so a half-made one would keep the session alive.
            const PySession* ps = &nb::cast<const PySession&>(session);
            BatchPolicy p;
            p.max_batch = max_batch;
            p.max_queue_delay_us = max_queue_delay_us;
            p.preferred_sizes = std::move(preferred_sizes);
            p.max_queue = max_queue;
            p.merge = merge;
            std::unique_ptr<DynamicBatcher> batcher = Take(DynamicBatcher::Create(ps->s(), p));
            new (self) PyBatcher();
            self->session = ps;
            self->session_ref = std::move(session);
            self->batcher = std::move(batcher);
          },
          "session"_a, "max_batch"_a = 32, "max_queue_delay_us"_a = 500,
          "preferred_sizes"_a = std::vector<int>(), "max_queue"_a = 1024, "merge"_a = true)
      .def("infer", &PyBatcher::Infer, "feeds"_a)
      .def("submit", &PyBatcher::Submit, "feeds"_a, "future"_a)
      .def("close", &PyBatcher::Close)
      .def("stats", &PyBatcher::Stats);

  m.def("_quantize", &QuantizeModel, "model"_a, "out"_a, "calibrate"_a, "calibration"_a, "method"_a,
        "percentile"_a, "batch"_a, "keep_float"_a, "quantize_all"_a, "bias_correction"_a,
        "channel_activations"_a, "threads"_a, "samples"_a.none(), "recipe"_a, "cache"_a,
        "trt_cache"_a, "max_drop"_a.none(), "labels"_a, "labels_array"_a.none(), "eval_samples"_a,
        "compare"_a, "progress"_a.none());
  m.def("_image_job", &RunImageJob, "session"_a, "images"_a, "out"_a, "recipe"_a, "labels"_a,
        "batch"_a, "workers"_a, "top_k"_a, "resume"_a, "shard"_a, "shards"_a,
        "progress"_a = nb::none());
  nb::class_<PyImageDecoder>(m, "_ImageDecoder")
      .def(nb::init<const std::string&, const std::vector<int64_t>&, int>(), "recipe"_a,
           "input_dims"_a, "threads"_a = 1)
      .def_prop_ro("recipe", [](PyImageDecoder& d) { return d.d().recipe(); })
      .def_prop_ro("recipe_json", [](PyImageDecoder& d) { return d.d().recipe_json(); })
      .def_prop_ro("threads", [](PyImageDecoder& d) { return d.d().threads(); })
      .def_prop_ro("sample_shape", [](PyImageDecoder& d) { return d.d().sample_shape(); })
      .def("decode", &PyImageDecoder::Decode, "images"_a)
      .def("transform", &PyImageDecoder::Transform, "images"_a);
  m.def("_top_k", &TopK, "scores"_a, "k"_a);
  m.def("_doctor_json", [] {
    nb::gil_scoped_release release;
    return DoctorReportJson();
  });
  m.def("_load_backend", [](const std::string& backend) {
    auto parsed = ParseBackend(backend);
    if (!parsed.ok()) Throw(parsed.status());
    Status s;
    {
      nb::gil_scoped_release release;
      s = LoadBackend(*parsed);
    }
    Check(s);
  });
}
