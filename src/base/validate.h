// Range checks for the options structs' validate() methods. Each names the
// option as the user spells it (its long command-line name, which is also
// its config-file key) and the allowed range, and throws nmt::UsageError:
//   "--learning-rate must be a finite number > 0, got nan"
//   "--threads must be between 0 and 1024, got -3"
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>

#include "base/error.h"

namespace nmt::check {

// Whether the ends of a range of doubles belong to it.
enum class End { kClosed, kOpen };

constexpr double kNoLimit = std::numeric_limits<double>::infinity();

// The values a numeric option allows: lo to hi, each end closed or open (open
// ends apply to floating-point options only; an infinite hi: no upper bound).
// Integer options take whole bounds, exact in a double (below 2^53).
struct Range {
  double lo = 0;
  double hi = kNoLimit;
  End lo_end = End::kClosed;
  End hi_end = End::kClosed;
};

inline std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// An integer option in [lo, hi].
template <typename Int, typename = std::enable_if_t<std::is_integral_v<Int>>>
void in_range(const char* option, Int value, int64_t lo, int64_t hi = std::numeric_limits<int64_t>::max()) {
  const auto v = static_cast<int64_t>(value);
  if (v >= lo && v <= hi) return;
  if (hi == std::numeric_limits<int64_t>::max())
    throw UsageError(std::string(option) + " must be at least " + std::to_string(lo) + ", got " + std::to_string(v));
  throw UsageError(std::string(option) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
              ", got " + std::to_string(v));
}

// A finite floating-point option between lo and hi (each end closed or
// open; an infinite hi means no upper bound).
inline void in_range(const char* option, double v, double lo, double hi, End lo_end = End::kClosed,
                     End hi_end = End::kClosed) {
  const bool above = lo_end == End::kClosed ? v >= lo : v > lo;
  const bool below = std::isinf(hi) || (hi_end == End::kClosed ? v <= hi : v < hi);
  if (std::isfinite(v) && above && below) return;
  std::string range;
  if (std::isinf(hi)) {
    range = (lo_end == End::kClosed ? ">= " : "> ") + number(lo);
  } else {
    range = std::string("in ") + (lo_end == End::kClosed ? "[" : "(") + number(lo) + ", " + number(hi) +
            (hi_end == End::kClosed ? "]" : ")");
  }
  throw UsageError(std::string(option) + " must be a finite number " + range + ", got " + number(v));
}

// An integer or floating-point option in `range`; throws nmt::UsageError as
// the two functions above do.
template <typename T>
void in_range(const char* option, T value, const Range& range) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, "a range needs a numeric option");
  if constexpr (std::is_floating_point_v<T>) {
    in_range(option, static_cast<double>(value), range.lo, range.hi, range.lo_end, range.hi_end);
  } else {
    const int64_t hi =
        std::isinf(range.hi) ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(range.hi);
    in_range(option, value, static_cast<int64_t>(range.lo), hi);
  }
}

}  // namespace nmt::check
