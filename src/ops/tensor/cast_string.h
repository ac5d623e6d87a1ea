// Cast and CastLike to and from string tensors (cast_string.cc has the rules), as ONNX's
// reference does it with numpy: numbers are written as numpy prints them (shortest round-trip
// digits), and strings are parsed as Python's float() and int() parse them.
#pragma once

#include <string>

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "ops/tensor/cast.h"

namespace kiln::ops {

// Whether `t` is a type the string casts read or write: the castable types and string.
bool StringCastable(DataType t);

// Writes every element of `in` (any castable type, or string: copied) as text into `out`, a
// string tensor of in's shape.
Status CastToStrings(const Tensor& in, Tensor* out);

// Parses every element of the string tensor `in` into `out`, an allocated tensor of a castable
// type and in's shape, with `rules` for the narrow floats. An element that does not parse, or an
// integer beyond the range numpy takes, is an error naming its index and text.
Status CastFromStrings(const Tensor& in, Tensor* out, const CastRules& rules);

}  // namespace kiln::ops
