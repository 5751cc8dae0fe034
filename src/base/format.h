// Where numbers meet text in what nmt prints: a count with its noun in the
// right number ("1 sentence", "2 sentences"), and a double in the shortest
// decimal form that reads back to the same value (0.1, not
// 0.10000000000000001). Torch-free, header-only.
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace nmt {

// "N noun" with the noun singular for N == 1 (and -1), else `plural`, which
// defaults to the singular with "s" appended: counted(1, "thread") is
// "1 thread", counted(3, "thread") "3 threads", counted(2, "entry",
// "entries") "2 entries". Never throws (beyond std::bad_alloc).
inline std::string counted(int64_t n, std::string_view singular, std::string_view plural = {}) {
  std::string out = std::to_string(n) + ' ';
  if (n == 1 || n == -1) return out.append(singular);
  if (!plural.empty()) return out.append(plural);
  return out.append(singular).append("s");
}

// The shortest decimal text that reads back (strtod, TOML, Python float) to
// exactly `v`, laid out as Python's repr lays it out, less a final ".0":
// plain digits from 1e-4 up to 1e16 (0.1, 0.0003, 2, 100.25), an exponent
// outside (1e-05, 1e+16). NaN and infinities give "nan", "inf" and "-inf".
// Never throws (beyond std::bad_alloc).
inline std::string shortest_decimal(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  // Shortest round trip (C++17), as d.ddde+XX.
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  const int exp = std::atoi(sci.c_str() + e + 1);
  if (exp < -4 || exp >= 16) return sci;
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (sci[i] >= '0' && sci[i] <= '9') digits += sci[i];
  const auto point = static_cast<size_t>(exp + 1);  // digits before the decimal point, when exp >= 0
  std::string out = std::signbit(v) ? "-" : "";
  if (exp < 0) out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  else if (digits.size() <= point) out += digits + std::string(point - digits.size(), '0');
  else out += digits.substr(0, point) + "." + digits.substr(point);
  return out;
}

}  // namespace nmt
