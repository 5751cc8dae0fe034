// UTF-8 validation and small text helpers shared by the corpus reader,
// the tokenizer and the metrics.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace nmt {

// Returns the byte offset of the first invalid UTF-8 sequence in `s` (overlong
// forms, surrogates and code points above U+10FFFF count as invalid), or
// std::string_view::npos when `s` is valid.
size_t find_invalid_utf8(std::string_view s);

// The length in bytes of the valid UTF-8 sequence at s[i] (RFC 3629: no
// overlong forms, surrogates or values past U+10FFFF), with its code point in
// *cp; 0 when the bytes at i are not one. Requires i < s.size().
size_t decode_code_point(std::string_view s, size_t i, char32_t* cp);

// Decodes UTF-8 into code points. An invalid byte becomes U+DC80..U+DCFF
// (Python's "surrogateescape") and decoding resumes at the next byte, so
// nothing is lost; encode_utf8() writes such bytes back unchanged. Never throws.
std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(const std::u32string& s);
// Appends the UTF-8 encoding of `c` to `out` (an escaped byte comes back raw).
void append_utf8(std::string& out, char32_t c);

// Whether text beginning with `head` looks like UTF-16: a byte-order mark
// (FF FE or FE FF), or NUL in every other byte of its first characters.
bool looks_like_utf16(std::string_view head);

// Index of the first byte of the last character of `s` cut at `s.size()`
// when that character is incomplete, else s.size(): resizing `s` to it ends
// `s` on a character boundary.
size_t utf8_safe_cut(std::string_view s);

// "looks like UTF-16 text ...; convert it first: iconv -f UTF-16 -t UTF-8 PATH > PATH.utf8".
std::string utf16_advice(const std::string& path);

// What to tell the user about a NUL byte at byte `pos` (0-based) of a line
// of `path` beginning with `head`: that the file looks like UTF-16 and how
// to convert it, or "NUL byte at byte N (binary file?)".
std::string nul_byte_problem(std::string_view head, size_t pos, const std::string& path);

// Number of Unicode code points in a valid UTF-8 string.
size_t utf8_length(std::string_view s);

// Strips a trailing '\r' (CRLF files) and surrounding ASCII whitespace.
std::string_view trim(std::string_view s);

// Splits on runs of ASCII whitespace; no empty fields.
std::vector<std::string> split_ws(std::string_view s);

}  // namespace nmt
