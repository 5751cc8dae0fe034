// UTF-8 validation and decoding (RFC 3629) and whitespace helpers.
#include "base/utf8.h"

#include <algorithm>

namespace nmt {

size_t decode_code_point(std::string_view s, size_t i, char32_t* cp) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  const unsigned char c = p[i];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len;
  char32_t v;
  if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; }
  else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; }
  else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; }
  else return 0;  // continuation byte, 0xC0/0xC1 (overlong) or > 0xF4
  if (i + len > n) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((p[i + k] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (p[i + k] & 0x3F);
  }
  if ((len == 3 && v < 0x800) || (len == 4 && v < 0x10000) || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return len;
}

size_t find_invalid_utf8(std::string_view s) {
  char32_t cp;
  for (size_t i = 0; i < s.size();) {
    const size_t len = decode_code_point(s, i, &cp);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  char32_t cp;
  for (size_t i = 0; i < s.size();) {
    const size_t len = decode_code_point(s, i, &cp);
    if (len > 0) {
      out.push_back(cp);
      i += len;
    } else {
      out.push_back(0xDC00 + static_cast<unsigned char>(s[i]));  // escape one byte, resynchronise on the next
      ++i;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c >= 0xDC80 && c <= 0xDCFF) {
    out.push_back(static_cast<char>(c - 0xDC00));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string encode_utf8(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

bool looks_like_utf16(std::string_view head) {
  if (head.size() >= 2 && ((head[0] == '\xFF' && head[1] == '\xFE') || (head[0] == '\xFE' && head[1] == '\xFF')))
    return true;
  // ASCII text in UTF-16: "a\0b\0c\0" (little-endian) or "\0a\0b\0c" (big-endian).
  const size_t n = std::min<size_t>(head.size(), 64) & ~size_t{1};
  if (n < 4) return false;
  size_t nul[2] = {0, 0};
  for (size_t i = 0; i < n; ++i) nul[i % 2] += head[i] == '\0';
  return (nul[1] == n / 2 && nul[0] == 0) || (nul[0] == n / 2 && nul[1] == 0);
}

size_t utf8_safe_cut(std::string_view s) {
  if (s.empty()) return 0;
  size_t i = s.size() - 1;
  for (int back = 0; back < 3 && i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; ++back) --i;
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  return i + len > s.size() ? i : s.size();
}

std::string utf16_advice(const std::string& path) {
  return "looks like UTF-16 text, but nmt reads UTF-8; convert it first: iconv -f UTF-16 -t UTF-8 " + path + " > " +
         path + ".utf8";
}

std::string nul_byte_problem(std::string_view head, size_t pos, const std::string& path) {
  if (looks_like_utf16(head)) return utf16_advice(path) + " (NUL byte at byte " + std::to_string(pos + 1) + ")";
  return "NUL byte at byte " + std::to_string(pos + 1) + " (binary file?)";
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string_view trim(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; };
  size_t b = 0, e = s.size();
  while (b < e && ws(s[b])) ++b;
  while (e > b && ws(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split_ws(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) ++i;
    size_t j = i;
    while (j < s.size() && !(s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\n')) ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace nmt
