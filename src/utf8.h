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

// Number of Unicode code points in a valid UTF-8 string.
size_t utf8_length(std::string_view s);

// Strips a trailing '\r' (CRLF files) and surrounding ASCII whitespace.
std::string_view trim(std::string_view s);

// Splits on runs of ASCII whitespace; no empty fields.
std::vector<std::string> split_ws(std::string_view s);

}  // namespace nmt
