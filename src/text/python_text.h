// Python 3 string semantics on UTF-8 text, as sacreBLEU's scores depend on
// them: str.isspace(), str.split(), str.rstrip() and str.lower(). Text is
// decoded with decode_utf8() (base/utf8.h), so invalid bytes travel as
// single opaque characters and are never whitespace. Nothing here throws.
#pragma once
#include <string>
#include <vector>

namespace nmt {

// Python str.isspace() for one code point (checked exhaustively against Python 3.11).
bool is_py_space(char32_t c);
// Python str.split() with no argument.
std::vector<std::u32string> py_split(const std::u32string& s);
std::vector<std::string> py_split(const std::string& s);
// Python str.rstrip() with no argument, in place.
void py_rstrip(std::u32string& s);
// Python str.lower() on code points: the simple-lowercase table of Python
// 3.11 (Unicode 14.0) plus U+0130 -> "i" U+0307; see lowercase() in metrics.h.
std::u32string lower_u32(const std::u32string& s);

// The first letter of unicodedata.category(c) when it is 'P' (punctuation),
// 'S' (symbol) or 'N' (number), else 0: Unicode 14.0 (Python 3.11), from
// the table scripts/gen_unicode_classes.py writes. Invalid code points give 0.
char unicode_major_category(char32_t c);

// Python 3 str.lower() on UTF-8 text (exposed for tests). Uses the full
// simple-lowercase table of Python 3.11 (Unicode 14.0) for all scripts, plus
// the special case U+0130 'İ' -> "i̇" (i + U+0307). Limits: Greek final-sigma
// context is not applied ('Σ' always becomes 'σ', Python gives 'ς' at the end
// of a word), and characters given lowercase mappings after Unicode 14.0 are
// left unchanged. Never throws.
std::string lowercase(const std::string& text);

}  // namespace nmt
