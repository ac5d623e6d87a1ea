// Dispatch of a reference kernel templated on its element type over a list of dtypes, as a
// function (KILN_DISPATCH_* in common.h are macros with a fixed list):
//
//   return DispatchAmong<float, double>(x.dtype(), describe(), [&](auto tag) {
//     using T = decltype(tag);
//     Run<T>(x.data<T>(), ...);
//     return OkStatus();
//   });
//
// Adding a dtype to a kernel is adding its C++ type to the list (it needs a kiln::DataTypeOf).
// Header-only, no state.
#pragma once

#include <string>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::ops {

// f(T{}) for the T among Ts whose DataTypeOf is `dtype`; Unsupported naming the node otherwise.
template <typename... Ts, typename F>
Status DispatchAmong(DataType dtype, const std::string& describe, F&& f) {
  Status s = OkStatus();
  const bool hit = ((dtype == DataTypeOf<Ts>::value ? (s = f(Ts{}), true) : false) || ...);
  if (!hit)
    return Unsupported("failed to run " + describe + ": unsupported dtype " + DataTypeName(dtype));
  return s;
}

// The floating types kiln's reference kernels compute (float16 models run as float32).
template <typename F>
Status DispatchFloating(DataType dtype, const std::string& describe, F&& f) {
  return DispatchAmong<float, double>(dtype, describe, static_cast<F&&>(f));
}

}  // namespace kiln::ops
