// Keys' cubic convolution kernel, shared by Resize (cubic_coeff_a) and GridSample (a = -0.75).
#pragma once

#include <cmath>

namespace kiln::ops {

// The kernel's weight at distance |d| (0 from 2 on).
inline double KeysCubic(double d, double a) {
  d = std::abs(d);
  if (d <= 1.0) return ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0;
  if (d < 2.0) return ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a;
  return 0.0;
}

}  // namespace kiln::ops
