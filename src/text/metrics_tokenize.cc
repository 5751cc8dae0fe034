// sacreBLEU's tokenizers for BLEU (see metrics.h): Tokenizer13a (through
// TokenizerRegexp) and TokenizerV14International. Each function mirrors a
// piece of sacreBLEU's Python source, named in its comment.
#include <string>

#include "base/utf8.h"
#include "text/metrics.h"
#include "text/python_text.h"

namespace nmt {
namespace {

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

}  // namespace

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

std::string tokenize_intl(const std::string& line) {
  auto P = [](char32_t c) { return unicode_major_category(c) == 'P'; };
  auto N = [](char32_t c) { return unicode_major_category(c) == 'N'; };
  // regex.sub of a two-character pattern: non-overlapping matches, left to right.
  auto sub_pairs = [](const std::u32string& in, auto first, auto second, bool space_before) {
    std::u32string out;
    for (size_t i = 0; i < in.size();) {
      if (i + 1 < in.size() && first(in[i]) && second(in[i + 1])) {
        if (space_before) out += U' ';
        out += in[i];
        out += U' ';
        out += in[i + 1];
        if (!space_before) out += U' ';
        i += 2;
      } else {
        out += in[i++];
      }
    }
    return out;
  };
  std::u32string u = decode_utf8(line);
  u = sub_pairs(u, [&](char32_t c) { return !N(c); }, P, false);  // (\P{N})(\p{P}) -> '\1 \2 '
  u = sub_pairs(u, P, [&](char32_t c) { return !N(c); }, true);   // (\p{P})(\P{N}) -> ' \1 \2'
  std::u32string sym;                                              // (\p{S}) -> ' \1 '
  for (char32_t c : u) {
    if (unicode_major_category(c) == 'S') {
      sym += U' ';
      sym += c;
      sym += U' ';
    } else {
      sym += c;
    }
  }
  std::string out;
  for (const auto& w : py_split(sym)) {
    if (!out.empty()) out += ' ';
    out += encode_utf8(w);
  }
  return out;
}

}  // namespace nmt
