#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace kiln {
namespace {

const char* DescrOf(DataType t) {
  switch (t) {
    case DataType::kFloat:
      return "<f4";
    case DataType::kDouble:
      return "<f8";
    case DataType::kInt8:
      return "|i1";
    case DataType::kInt16:
      return "<i2";
    case DataType::kInt32:
      return "<i4";
    case DataType::kInt64:
      return "<i8";
    case DataType::kUInt8:
      return "|u1";
    case DataType::kUInt16:
      return "<u2";
    case DataType::kUInt32:
      return "<u4";
    case DataType::kUInt64:
      return "<u8";
    case DataType::kBool:
      return "|b1";
    case DataType::kFloat16:
      return "<f2";
    // Types numpy lacks are written as numpy writes ml_dtypes' arrays: raw bytes ("V"), read back
    // with np.load(p).view(ml_dtypes.<name>) (kiln run prints the name); int4/uint4, which kiln
    // holds one per byte, as int8/uint8 values.
    case DataType::kBFloat16:
      return "<V2";
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kFloat4E2M1:
    case DataType::kFloat8E8M0:
      return "|V1";
    case DataType::kInt4:
      return "|i1";
    case DataType::kUInt4:
      return "|u1";
    default:
      return nullptr;
  }
}

DataType FromDescr(const std::string& d) {
  for (DataType t : {DataType::kFloat, DataType::kDouble, DataType::kInt8, DataType::kInt16,
                     DataType::kInt32, DataType::kInt64, DataType::kUInt8, DataType::kUInt16,
                     DataType::kUInt32, DataType::kUInt64, DataType::kBool, DataType::kFloat16}) {
    std::string ours = DescrOf(t);
    if (d == ours || (d.size() == 3 && d[0] == '=' && d.substr(1) == ours.substr(1)) ||
        (ours[0] == '|' && d.size() == 3 && (d[0] == '<' || d[0] == '=') &&
         d.substr(1) == ours.substr(1)))
      return t;
  }
  return DataType::kUndefined;
}

// Value of 'key' in the header dict: the text after "'key':" up to the next top-level comma.
bool FindField(const std::string& h, const std::string& key, std::string* out) {
  size_t p = h.find("'" + key + "'");
  if (p == std::string::npos) return false;
  p = h.find(':', p);
  if (p == std::string::npos) return false;
  ++p;
  while (p < h.size() && h[p] == ' ') ++p;
  size_t e = p;
  if (h[p] == '(') {
    e = h.find(')', p);
    if (e == std::string::npos) return false;
    ++e;
  } else {
    while (e < h.size() && h[e] != ',' && h[e] != '}') ++e;
  }
  *out = h.substr(p, e - p);
  return true;
}

// A column-major array (numpy's fortran_order, what np.save writes for an array like a.T) into
// `out`'s row-major storage: element (i0, ..., ik) sits at sum_j i_j * (d0 * ... * d(j-1)).
void FromFortranOrder(const char* src, Tensor* out) {
  const Shape& shape = out->shape();
  const size_t es = DataTypeSize(out->dtype());
  const int64_t n = out->numel();
  std::vector<int64_t> idx(shape.size(), 0), stride(shape.size(), 1);
  for (size_t j = 1; j < shape.size(); ++j) stride[j] = stride[j - 1] * shape[j - 1];
  char* dst = static_cast<char*>(out->raw());
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (size_t j = 0; j < shape.size(); ++j) off += idx[j] * stride[j];
    std::memcpy(dst + e * es, src + off * es, es);
    for (size_t j = shape.size(); j-- > 0;) {  // next row-major index
      if (++idx[j] < shape[j]) break;
      idx[j] = 0;
    }
  }
}

}  // namespace

StatusOr<Tensor> ParseNpy(const std::string& b) {
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0)
    return InvalidArgument("not a .npy file (missing the \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(b[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) return InvalidArgument("truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<size_t>(static_cast<unsigned char>(b[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    return InvalidArgument(".npy format version " + std::to_string(major) + " is not supported");
  }
  if (header_start + header_len > b.size()) return InvalidArgument("truncated .npy header");
  std::string h = b.substr(header_start, header_len);
  std::string descr, fortran, shape_s;
  if (!FindField(h, "descr", &descr) || !FindField(h, "fortran_order", &fortran) ||
      !FindField(h, "shape", &shape_s))
    return InvalidArgument("malformed .npy header: " + h);
  if (descr.size() >= 2) descr = descr.substr(1, descr.size() - 2);
  DataType dt = FromDescr(descr);
  if (dt == DataType::kUndefined)
    return InvalidArgument(".npy dtype '" + descr + "' is not supported");
  const bool fortran_order = fortran.rfind("True", 0) == 0;
  Shape shape;
  std::string digits;
  for (char c : shape_s) {
    if (c >= '0' && c <= '9') {
      digits += c;
    } else if (!digits.empty()) {
      if (digits.size() > 15) return InvalidArgument("malformed .npy shape " + shape_s);
      shape.push_back(std::stoll(digits));
      digits.clear();
    } else if (c == '-') {
      return InvalidArgument("negative dimension in .npy shape " + shape_s);
    }
  }
  size_t data_start = header_start + header_len;
  Tensor t = Tensor::View(dt, shape, nullptr);
  uint64_t want = 1;
  for (int64_t d : shape) {
    if (d != 0 && want > (uint64_t{1} << 40) / static_cast<uint64_t>(d))
      return InvalidArgument(".npy shape " + shape_s + " is implausibly large");
    want *= static_cast<uint64_t>(d);
  }
  want *= DataTypeSize(dt);
  if (b.size() - data_start != want)
    return InvalidArgument(".npy data holds " + std::to_string(b.size() - data_start) +
                           " bytes; shape " + ShapeToString(shape) + " of " + DataTypeName(dt) +
                           " needs " + std::to_string(want));
  Tensor out = Tensor::Empty(dt, shape);
  if (want && !fortran_order) std::memcpy(out.raw(), b.data() + data_start, want);
  if (want && fortran_order) FromFortranOrder(b.data() + data_start, &out);
  return out;
}

StatusOr<Tensor> ReadNpyFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot read '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  auto t = ParseNpy(ss.str());
  if (!t.ok()) return Status(t.status()).AddContext("while reading '" + path + "'");
  return t;
}

Status WriteNpyFile(const Tensor& t, const std::string& path) {
  const char* descr = DescrOf(t.dtype());
  if (!descr)
    return InvalidArgument(std::string("cannot write dtype ") + DataTypeName(t.dtype()) +
                           " to .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i)
    shape += std::to_string(t.shape()[i]) +
             (t.shape().size() == 1 || i + 1 < t.shape().size() ? "," : "");
  shape += ")";
  // The trailing comma rule: "(3,)" for rank 1, "(2,3)" otherwise.
  if (t.shape().size() > 1 && shape[shape.size() - 2] == ',') shape.erase(shape.size() - 2, 1);
  std::string header =
      "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) return InvalidArgument("cannot write '" + path + "'");
  const char magic[] = "\x93NUMPY\x01\x00";
  f.write(magic, 8);
  uint16_t hl = static_cast<uint16_t>(header.size());
  char hlb[2] = {static_cast<char>(hl & 0xff), static_cast<char>(hl >> 8)};
  f.write(hlb, 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.bytes()));
  if (!f) return InvalidArgument("failed writing '" + path + "'");
  return OkStatus();
}

}  // namespace kiln
