// Implementation of corpus BLEU and chrF matching sacreBLEU 2.x; see metrics.h.
// Each function mirrors a piece of sacreBLEU's Python source (named in its
// comment) and keeps the same floating-point operation order.
#include "metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <unordered_map>

namespace nmt {
namespace {

constexpr int kMaxOrder = 4;      // sacreBLEU MAX_NGRAM_ORDER
constexpr int kChrfOrder = 6;     // CHRF.CHAR_ORDER
constexpr const char* kVersion = "2.x";

// ---------------------------------------------------------------------------
// UTF-8 <-> code points. Invalid bytes become U+DC80..U+DCFF (Python's
// "surrogateescape") and are written back unchanged, so nothing is lost.

// Decodes UTF-8 into code points; never throws (see surrogateescape above).
std::u32string decode_utf8(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    int len = 0;
    char32_t cp = 0, min_cp = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2; cp = b0 & 0x1F; min_cp = 0x80;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3; cp = b0 & 0x0F; min_cp = 0x800;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4; cp = b0 & 0x07; min_cp = 0x10000;
    }
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      const unsigned char b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) ok = false;
      else cp = (cp << 6) | (b & 0x3F);
    }
    if (ok && (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
    if (ok) {
      out.push_back(cp);
      i += len;
    } else {
      out.push_back(0xDC00 + b0);  // escape one byte, resynchronise on the next
      ++i;
    }
  }
  return out;
}

// Appends the UTF-8 encoding of one code point (escaped bytes come back raw).
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

// Python str.isspace(), which is what str.split()/str.strip() use
// (checked exhaustively against Python 3.11).
bool is_py_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python str.split() with no argument, on code points.
std::vector<std::u32string> py_split(const std::u32string& s) {
  std::vector<std::u32string> out;
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    while (i < n && is_py_space(s[i])) ++i;
    const size_t start = i;
    while (i < n && !is_py_space(s[i])) ++i;
    if (i > start) out.emplace_back(s, start, i - start);
  }
  return out;
}

// Python str.split() with no argument, on UTF-8 text.
std::vector<std::string> py_split(const std::string& s) {
  std::vector<std::string> out;
  for (const auto& w : py_split(decode_utf8(s))) out.push_back(encode_utf8(w));
  return out;
}

// Python str.rstrip() with no argument.
void py_rstrip(std::u32string& s) {
  while (!s.empty() && is_py_space(s.back())) s.pop_back();
}

// ---------------------------------------------------------------------------
// Python str.lower(): simple lowercase mappings of Python 3.11 (Unicode 14.0),
// generated from [chr(c).lower() for c in range(0x110000)] and compressed into
// runs {first, last, step, delta}: c in [first, last] with (c - first) % step
// == 0 maps to c + delta.
struct LowerRun {
  char32_t first, last;
  int step, delta;
};
const LowerRun kLowerRuns[] = {
    {0x0041, 0x005A, 1, 32}, {0x00C0, 0x00D6, 1, 32}, {0x00D8, 0x00DE, 1, 32}, {0x0100, 0x012E, 2, 1},
    {0x0132, 0x0136, 2, 1}, {0x0139, 0x0147, 2, 1}, {0x014A, 0x0176, 2, 1}, {0x0178, 0x0178, 1, -121},
    {0x0179, 0x017D, 2, 1}, {0x0181, 0x0181, 1, 210}, {0x0182, 0x0184, 2, 1}, {0x0186, 0x0186, 1, 206},
    {0x0187, 0x0187, 1, 1}, {0x0189, 0x018A, 1, 205}, {0x018B, 0x018B, 1, 1}, {0x018E, 0x018E, 1, 79},
    {0x018F, 0x018F, 1, 202}, {0x0190, 0x0190, 1, 203}, {0x0191, 0x0191, 1, 1}, {0x0193, 0x0193, 1, 205},
    {0x0194, 0x0194, 1, 207}, {0x0196, 0x0196, 1, 211}, {0x0197, 0x0197, 1, 209}, {0x0198, 0x0198, 1, 1},
    {0x019C, 0x019C, 1, 211}, {0x019D, 0x019D, 1, 213}, {0x019F, 0x019F, 1, 214}, {0x01A0, 0x01A4, 2, 1},
    {0x01A6, 0x01A6, 1, 218}, {0x01A7, 0x01A7, 1, 1}, {0x01A9, 0x01A9, 1, 218}, {0x01AC, 0x01AC, 1, 1},
    {0x01AE, 0x01AE, 1, 218}, {0x01AF, 0x01AF, 1, 1}, {0x01B1, 0x01B2, 1, 217}, {0x01B3, 0x01B5, 2, 1},
    {0x01B7, 0x01B7, 1, 219}, {0x01B8, 0x01B8, 1, 1}, {0x01BC, 0x01BC, 1, 1}, {0x01C4, 0x01C4, 1, 2},
    {0x01C5, 0x01C5, 1, 1}, {0x01C7, 0x01C7, 1, 2}, {0x01C8, 0x01C8, 1, 1}, {0x01CA, 0x01CA, 1, 2},
    {0x01CB, 0x01DB, 2, 1}, {0x01DE, 0x01EE, 2, 1}, {0x01F1, 0x01F1, 1, 2}, {0x01F2, 0x01F4, 2, 1},
    {0x01F6, 0x01F6, 1, -97}, {0x01F7, 0x01F7, 1, -56}, {0x01F8, 0x021E, 2, 1}, {0x0220, 0x0220, 1, -130},
    {0x0222, 0x0232, 2, 1}, {0x023A, 0x023A, 1, 10795}, {0x023B, 0x023B, 1, 1}, {0x023D, 0x023D, 1, -163},
    {0x023E, 0x023E, 1, 10792}, {0x0241, 0x0241, 1, 1}, {0x0243, 0x0243, 1, -195}, {0x0244, 0x0244, 1, 69},
    {0x0245, 0x0245, 1, 71}, {0x0246, 0x024E, 2, 1}, {0x0370, 0x0372, 2, 1}, {0x0376, 0x0376, 1, 1},
    {0x037F, 0x037F, 1, 116}, {0x0386, 0x0386, 1, 38}, {0x0388, 0x038A, 1, 37}, {0x038C, 0x038C, 1, 64},
    {0x038E, 0x038F, 1, 63}, {0x0391, 0x03A1, 1, 32}, {0x03A3, 0x03AB, 1, 32}, {0x03CF, 0x03CF, 1, 8},
    {0x03D8, 0x03EE, 2, 1}, {0x03F4, 0x03F4, 1, -60}, {0x03F7, 0x03F7, 1, 1}, {0x03F9, 0x03F9, 1, -7},
    {0x03FA, 0x03FA, 1, 1}, {0x03FD, 0x03FF, 1, -130}, {0x0400, 0x040F, 1, 80}, {0x0410, 0x042F, 1, 32},
    {0x0460, 0x0480, 2, 1}, {0x048A, 0x04BE, 2, 1}, {0x04C0, 0x04C0, 1, 15}, {0x04C1, 0x04CD, 2, 1},
    {0x04D0, 0x052E, 2, 1}, {0x0531, 0x0556, 1, 48}, {0x10A0, 0x10C5, 1, 7264}, {0x10C7, 0x10C7, 1, 7264},
    {0x10CD, 0x10CD, 1, 7264}, {0x13A0, 0x13EF, 1, 38864}, {0x13F0, 0x13F5, 1, 8}, {0x1C90, 0x1CBA, 1, -3008},
    {0x1CBD, 0x1CBF, 1, -3008}, {0x1E00, 0x1E94, 2, 1}, {0x1E9E, 0x1E9E, 1, -7615}, {0x1EA0, 0x1EFE, 2, 1},
    {0x1F08, 0x1F0F, 1, -8}, {0x1F18, 0x1F1D, 1, -8}, {0x1F28, 0x1F2F, 1, -8}, {0x1F38, 0x1F3F, 1, -8},
    {0x1F48, 0x1F4D, 1, -8}, {0x1F59, 0x1F5F, 2, -8}, {0x1F68, 0x1F6F, 1, -8}, {0x1F88, 0x1F8F, 1, -8},
    {0x1F98, 0x1F9F, 1, -8}, {0x1FA8, 0x1FAF, 1, -8}, {0x1FB8, 0x1FB9, 1, -8}, {0x1FBA, 0x1FBB, 1, -74},
    {0x1FBC, 0x1FBC, 1, -9}, {0x1FC8, 0x1FCB, 1, -86}, {0x1FCC, 0x1FCC, 1, -9}, {0x1FD8, 0x1FD9, 1, -8},
    {0x1FDA, 0x1FDB, 1, -100}, {0x1FE8, 0x1FE9, 1, -8}, {0x1FEA, 0x1FEB, 1, -112}, {0x1FEC, 0x1FEC, 1, -7},
    {0x1FF8, 0x1FF9, 1, -128}, {0x1FFA, 0x1FFB, 1, -126}, {0x1FFC, 0x1FFC, 1, -9}, {0x2126, 0x2126, 1, -7517},
    {0x212A, 0x212A, 1, -8383}, {0x212B, 0x212B, 1, -8262}, {0x2132, 0x2132, 1, 28}, {0x2160, 0x216F, 1, 16},
    {0x2183, 0x2183, 1, 1}, {0x24B6, 0x24CF, 1, 26}, {0x2C00, 0x2C2F, 1, 48}, {0x2C60, 0x2C60, 1, 1},
    {0x2C62, 0x2C62, 1, -10743}, {0x2C63, 0x2C63, 1, -3814}, {0x2C64, 0x2C64, 1, -10727}, {0x2C67, 0x2C6B, 2, 1},
    {0x2C6D, 0x2C6D, 1, -10780}, {0x2C6E, 0x2C6E, 1, -10749}, {0x2C6F, 0x2C6F, 1, -10783}, {0x2C70, 0x2C70, 1, -10782},
    {0x2C72, 0x2C72, 1, 1}, {0x2C75, 0x2C75, 1, 1}, {0x2C7E, 0x2C7F, 1, -10815}, {0x2C80, 0x2CE2, 2, 1},
    {0x2CEB, 0x2CED, 2, 1}, {0x2CF2, 0x2CF2, 1, 1}, {0xA640, 0xA66C, 2, 1}, {0xA680, 0xA69A, 2, 1},
    {0xA722, 0xA72E, 2, 1}, {0xA732, 0xA76E, 2, 1}, {0xA779, 0xA77B, 2, 1}, {0xA77D, 0xA77D, 1, -35332},
    {0xA77E, 0xA786, 2, 1}, {0xA78B, 0xA78B, 1, 1}, {0xA78D, 0xA78D, 1, -42280}, {0xA790, 0xA792, 2, 1},
    {0xA796, 0xA7A8, 2, 1}, {0xA7AA, 0xA7AA, 1, -42308}, {0xA7AB, 0xA7AB, 1, -42319}, {0xA7AC, 0xA7AC, 1, -42315},
    {0xA7AD, 0xA7AD, 1, -42305}, {0xA7AE, 0xA7AE, 1, -42308}, {0xA7B0, 0xA7B0, 1, -42258}, {0xA7B1, 0xA7B1, 1, -42282},
    {0xA7B2, 0xA7B2, 1, -42261}, {0xA7B3, 0xA7B3, 1, 928}, {0xA7B4, 0xA7C2, 2, 1}, {0xA7C4, 0xA7C4, 1, -48},
    {0xA7C5, 0xA7C5, 1, -42307}, {0xA7C6, 0xA7C6, 1, -35384}, {0xA7C7, 0xA7C9, 2, 1}, {0xA7D0, 0xA7D0, 1, 1},
    {0xA7D6, 0xA7D8, 2, 1}, {0xA7F5, 0xA7F5, 1, 1}, {0xFF21, 0xFF3A, 1, 32}, {0x10400, 0x10427, 1, 40},
    {0x104B0, 0x104D3, 1, 40}, {0x10570, 0x1057A, 1, 39}, {0x1057C, 0x1058A, 1, 39}, {0x1058C, 0x10592, 1, 39},
    {0x10594, 0x10595, 1, 39}, {0x10C80, 0x10CB2, 1, 64}, {0x118A0, 0x118BF, 1, 32}, {0x16E40, 0x16E5F, 1, 32},
    {0x1E900, 0x1E921, 1, 34},
};

char32_t lower_simple(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  // Last run whose first <= c.
  const LowerRun* end = kLowerRuns + sizeof(kLowerRuns) / sizeof(kLowerRuns[0]);
  const LowerRun* it = std::upper_bound(kLowerRuns, end, c,
      [](char32_t v, const LowerRun& r) { return v < r.first; });
  if (it == kLowerRuns) return c;
  --it;
  if (c > it->last || (c - it->first) % static_cast<char32_t>(it->step) != 0) return c;
  return static_cast<char32_t>(static_cast<int64_t>(c) + it->delta);
}

std::u32string lower_u32(const std::u32string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c == 0x130) {  // SpecialCasing: LATIN CAPITAL LETTER I WITH DOT ABOVE
      out.push_back(U'i');
      out.push_back(0x307);
    } else {
      out.push_back(lower_simple(c));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Tokenizer13a / TokenizerRegexp helpers. The regexes only involve ASCII
// characters and UTF-8 multi-byte sequences contain no ASCII bytes, so running
// them on bytes gives the same result as Python running them on code points.

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Python str.replace(from, to): all non-overlapping occurrences, left to right.
void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (s.find(from) == std::string::npos) return;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

// re.compile(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])').sub(r' \1 ', s)
bool is_13a_symbol(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

// re.sub for a two-character pattern (first, second) with replacement
// `pre` + \1 + `mid` + \2 + `post`: scans left to right, non-overlapping,
// exactly like Python's re.sub for a fixed-width pattern.
template <typename F1, typename F2>
std::string sub_pairs(const std::string& s, F1 first, F2 second,
                      const char* pre, const char* mid, const char* post) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    if (i + 1 < n && first(s[i]) && second(s[i + 1])) {
      out += pre;
      out.push_back(s[i]);
      out += mid;
      out.push_back(s[i + 1]);
      out += post;
      i += 2;
    } else {
      out.push_back(s[i]);
      ++i;
    }
  }
  return out;
}

// TokenizerRegexp.__call__ (sacrebleu/tokenizers/tokenizer_re.py).
std::string tokenize_regexp(const std::string& line) {
  std::string s;
  s.reserve(line.size() * 2);
  for (char c : line) {
    if (is_13a_symbol(c)) {
      s.push_back(' ');
      s.push_back(c);
      s.push_back(' ');
    } else {
      s.push_back(c);
    }
  }
  auto not_digit = [](char c) { return !is_digit(c); };
  auto period_comma = [](char c) { return c == '.' || c == ','; };
  // tokenize period and comma unless preceded by a digit: r'([^0-9])([\.,])' -> r'\1 \2 '
  s = sub_pairs(s, not_digit, period_comma, "", " ", " ");
  // tokenize period and comma unless followed by a digit: r'([\.,])([^0-9])' -> r' \1 \2'
  s = sub_pairs(s, period_comma, not_digit, " ", " ", "");
  // tokenize dash when preceded by a digit: r'([0-9])(-)' -> r'\1 \2 '
  s = sub_pairs(s, is_digit, [](char c) { return c == '-'; }, "", " ", " ");
  // ' '.join(line.strip().split())
  std::string out;
  for (const auto& tok : py_split(s)) {
    if (!out.empty()) out.push_back(' ');
    out += tok;
  }
  return out;
}

// ---------------------------------------------------------------------------
// BLEU internals (sacrebleu/metrics/bleu.py, helpers.py).

using NgramCounts = std::unordered_map<std::string, int64_t>;

// BLEU._preprocess_segment: optional lower(), rstrip(), then the tokenizer.
std::string preprocess_bleu(const std::string& sent, const BleuOptions& opt) {
  std::u32string u = decode_utf8(sent);
  if (opt.lowercase) u = lower_u32(u);
  py_rstrip(u);
  std::string line = encode_utf8(u);
  return opt.tokenize == "13a" ? tokenize_13a(line) : line;
}

// helpers.extract_all_word_ngrams(line, 1, 4): counts of all 1..4-grams
// (tokens joined by ' ', which cannot occur inside a token); returns the length.
int64_t extract_word_ngrams(const std::string& line, NgramCounts& counts) {
  const std::vector<std::string> tokens = py_split(line);
  const size_t len = tokens.size();
  for (size_t n = 1; n <= static_cast<size_t>(kMaxOrder); ++n) {
    for (size_t i = 0; i + n <= len; ++i) {
      std::string key = tokens[i];
      for (size_t k = 1; k < n; ++k) {
        key.push_back(' ');
        key += tokens[i + k];
      }
      ++counts[key];
    }
  }
  return static_cast<int64_t>(len);
}

int ngram_order(const std::string& key) {
  return 1 + static_cast<int>(std::count(key.begin(), key.end(), ' '));
}

// BLEU._get_closest_ref_len: closest reference length, ties to the shorter.
int64_t closest_ref_len(int64_t hyp_len, const std::vector<int64_t>& ref_lens) {
  int64_t closest_diff = -1, closest_len = -1;
  for (int64_t ref_len : ref_lens) {
    const int64_t diff = hyp_len > ref_len ? hyp_len - ref_len : ref_len - hyp_len;
    if (closest_diff == -1 || diff < closest_diff) {
      closest_diff = diff;
      closest_len = ref_len;
    } else if (diff == closest_diff && ref_len < closest_len) {
      closest_len = ref_len;
    }
  }
  return closest_len;
}

// utils.my_log
double my_log(double num) { return num == 0.0 ? -9999999999.0 : std::log(num); }

std::string format(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, a);
  return buf;
}

// ---------------------------------------------------------------------------
// chrF internals (sacrebleu/metrics/chrf.py, helpers.py).

using CharNgramCounts = std::unordered_map<std::u32string, int64_t>;

// helpers.extract_all_char_ngrams(line, 6, include_whitespace).
std::vector<CharNgramCounts> extract_char_ngrams(const std::string& line, bool include_whitespace) {
  std::u32string s;
  if (include_whitespace) {
    s = decode_utf8(line);
  } else {
    for (const auto& w : py_split(decode_utf8(line))) s += w;  // ''.join(line.split())
  }
  std::vector<CharNgramCounts> out(kChrfOrder);
  for (size_t n = 1; n <= static_cast<size_t>(kChrfOrder); ++n) {
    for (size_t i = 0; i + n <= s.size(); ++i) ++out[n - 1][s.substr(i, n)];
  }
  return out;
}

// CHRF._compute_f_score: epsilon smoothing (chrF++.py, Moses, NLTK) or
// sacreBLEU's default effective-order averaging.
double chrf_f_score(const std::array<int64_t, 3 * kChrfOrder>& stats, const ChrfOptions& opt) {
  const double eps = 1e-16;
  const int factor = opt.beta * opt.beta;
  double avg_prec = 0.0, avg_rec = 0.0, smoothed = 0.0;
  int effective_order = 0;
  for (int i = 0; i < kChrfOrder; ++i) {
    const int64_t n_hyp = stats[3 * i], n_ref = stats[3 * i + 1], n_match = stats[3 * i + 2];
    const double prec = n_hyp > 0 ? static_cast<double>(n_match) / static_cast<double>(n_hyp) : eps;
    const double rec = n_ref > 0 ? static_cast<double>(n_match) / static_cast<double>(n_ref) : eps;
    const double denom = factor * prec + rec;
    smoothed += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (opt.eps_smoothing) return 100 * smoothed / kChrfOrder;
  if (effective_order == 0) {
    avg_prec = avg_rec = 0.0;
  } else {
    avg_prec /= effective_order;
    avg_rec /= effective_order;
  }
  if (avg_prec + avg_rec != 0.0) {
    double score = (1 + factor) * avg_prec * avg_rec;
    score /= ((factor * avg_prec) + avg_rec);
    return 100 * score;
  }
  return 0.0;
}

}  // namespace

// ---------------------------------------------------------------------------
// Public API.

std::string tokenize_13a(const std::string& input) {
  std::string line = input;
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  return tokenize_regexp(" " + line + " ");
}

std::string lowercase(const std::string& text) {
  return encode_utf8(lower_u32(decode_utf8(text)));
}

BleuScore compute_bleu(const std::array<int64_t, 4>& correct,
                       const std::array<int64_t, 4>& total,
                       int64_t sys_len, int64_t ref_len) {
  BleuScore r;
  r.counts = correct;
  r.totals = total;
  r.sys_len = static_cast<double>(sys_len);
  r.ref_len = static_cast<double>(ref_len);
  // Brevity penalty.
  if (sys_len < ref_len) {
    r.bp = sys_len > 0
               ? std::exp(1 - static_cast<double>(ref_len) / static_cast<double>(sys_len))
               : 0.0;
  } else {
    r.bp = 1.0;
  }
  r.precisions.fill(0.0);
  // Early stop if there are no matches (sacreBLEU #141).
  if (std::all_of(correct.begin(), correct.end(), [](int64_t c) { return c == 0; })) {
    r.score = 0.0;
    return r;
  }
  double smooth_mteval = 1.0;
  for (int n = 1; n <= kMaxOrder; ++n) {
    const int64_t t = total[n - 1];
    if (t == 0) break;
    if (correct[n - 1] == 0) {  // 'exp' smoothing
      smooth_mteval *= 2;
      r.precisions[n - 1] = 100. / (smooth_mteval * static_cast<double>(t));
    } else {
      r.precisions[n - 1] = 100. * static_cast<double>(correct[n - 1]) / static_cast<double>(t);
    }
  }
  double log_sum = 0.0;
  for (double p : r.precisions) log_sum += my_log(p);
  r.score = r.bp * std::exp(log_sum / kMaxOrder);
  return r;
}

BleuScore corpus_bleu_multiref(const std::vector<std::string>& hyps,
                               const std::vector<std::vector<std::string>>& ref_streams,
                               const BleuOptions& opt) {
  if (opt.tokenize != "13a" && opt.tokenize != "none") {
    throw std::invalid_argument("corpus_bleu: unknown tokenizer '" + opt.tokenize +
                                "' (supported: \"13a\", \"none\")");
  }
  if (ref_streams.empty()) {
    throw std::invalid_argument("corpus_bleu: no reference streams given");
  }
  for (size_t k = 0; k < ref_streams.size(); ++k) {
    if (ref_streams[k].size() != hyps.size()) {
      throw std::invalid_argument(
          "corpus_bleu: " + std::to_string(hyps.size()) + " hypotheses but reference stream " +
          std::to_string(k) + " has " + std::to_string(ref_streams[k].size()) + " segments");
    }
  }
  std::array<int64_t, 4> correct{}, total{};
  int64_t sys_len = 0, ref_len = 0;
  for (size_t i = 0; i < hyps.size(); ++i) {
    // BLEU._extract_reference_info: max count of each n-gram over references.
    NgramCounts ref_ngrams;
    std::vector<int64_t> ref_lens;
    for (const auto& stream : ref_streams) {
      NgramCounts this_ngrams;
      ref_lens.push_back(extract_word_ngrams(preprocess_bleu(stream[i], opt), this_ngrams));
      for (const auto& kv : this_ngrams) {
        int64_t& c = ref_ngrams[kv.first];
        c = std::max(c, kv.second);
      }
    }
    // BLEU._compute_segment_statistics.
    NgramCounts hyp_ngrams;
    const int64_t hyp_len = extract_word_ngrams(preprocess_bleu(hyps[i], opt), hyp_ngrams);
    sys_len += hyp_len;
    ref_len += closest_ref_len(hyp_len, ref_lens);
    for (const auto& kv : hyp_ngrams) {
      const int n = ngram_order(kv.first) - 1;
      total[n] += kv.second;
      auto it = ref_ngrams.find(kv.first);
      if (it != ref_ngrams.end()) correct[n] += std::min(kv.second, it->second);
    }
  }
  BleuScore r = compute_bleu(correct, total, sys_len, ref_len);
  r.nrefs = static_cast<int>(ref_streams.size());
  r.lowercase = opt.lowercase;
  r.tokenize = opt.tokenize;
  return r;
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps,
                      const std::vector<std::string>& refs,
                      const BleuOptions& opt) {
  if (hyps.size() != refs.size()) {
    throw std::invalid_argument("corpus_bleu: " + std::to_string(hyps.size()) +
                                " hypotheses but " + std::to_string(refs.size()) +
                                " references; they must be parallel");
  }
  return corpus_bleu_multiref(hyps, std::vector<std::vector<std::string>>{refs}, opt);
}

std::string BleuScore::signature() const {
  return "nrefs:" + std::to_string(nrefs) + "|case:" + (lowercase ? "lc" : "mixed") +
         "|eff:no|tok:" + tokenize + "|smooth:exp|version:" + kVersion;
}

std::string BleuScore::to_string() const {
  const double ratio = ref_len != 0.0 ? sys_len / ref_len : 0.0;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)",
                score, precisions[0], precisions[1], precisions[2], precisions[3], bp, ratio,
                static_cast<long long>(sys_len), static_cast<long long>(ref_len));
  return buf;
}

ChrfScore corpus_chrf(const std::vector<std::string>& hyps,
                      const std::vector<std::string>& refs, const ChrfOptions& opt) {
  if (opt.beta < 1) throw std::invalid_argument("corpus_chrf: beta must be at least 1");
  if (hyps.size() != refs.size()) {
    throw std::invalid_argument("corpus_chrf: " + std::to_string(hyps.size()) +
                                " hypotheses but " + std::to_string(refs.size()) +
                                " references; they must be parallel");
  }
  std::array<int64_t, 3 * kChrfOrder> stats{};
  for (size_t i = 0; i < hyps.size(); ++i) {
    const auto hyp_ngrams = extract_char_ngrams(hyps[i], opt.whitespace);
    const auto ref_ngrams = extract_char_ngrams(refs[i], opt.whitespace);
    for (int n = 0; n < kChrfOrder; ++n) {
      // CHRF._get_match_statistics
      int64_t hyp_count = 0, match_count = 0, ref_count = 0;
      for (const auto& kv : hyp_ngrams[n]) {
        hyp_count += kv.second;
        auto it = ref_ngrams[n].find(kv.first);
        if (it != ref_ngrams[n].end()) match_count += std::min(kv.second, it->second);
      }
      for (const auto& kv : ref_ngrams[n]) ref_count += kv.second;
      // Don't count hypothesis n-grams if the reference has none of this order.
      stats[3 * n] += ref_ngrams[n].empty() ? 0 : hyp_count;
      stats[3 * n + 1] += ref_count;
      stats[3 * n + 2] += match_count;
    }
  }
  ChrfScore score;
  score.score = chrf_f_score(stats, opt);
  score.options = opt;
  return score;
}

std::string ChrfScore::signature() const {
  return std::string("nrefs:1|case:mixed|eff:") + (options.eps_smoothing ? "no" : "yes") + "|nc:6|nw:0|space:" +
         (options.whitespace ? "yes" : "no") + "|version:" + kVersion;
}

std::string ChrfScore::to_string() const {
  return "chrF" + std::to_string(options.beta) + format(" = %.2f", score);
}

double exact_match(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  if (hyps.size() != refs.size())
    throw std::invalid_argument(std::to_string(hyps.size()) + " hypotheses but " + std::to_string(refs.size()) +
                                " references");
  if (hyps.empty()) return 0.0;
  size_t same = 0;
  for (size_t i = 0; i < hyps.size(); ++i) same += hyps[i] == refs[i];
  return 100.0 * static_cast<double>(same) / static_cast<double>(hyps.size());
}

}  // namespace nmt

