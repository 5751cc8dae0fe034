// The shape check of config files before toml++ reads them (see config_shape.h).
#include "base/config_shape.h"

#include <algorithm>
#include <cstdint>

#include "base/config.h"
#include "base/error.h"
#include "base/format.h"

namespace nmt {
namespace {

// What check_shape() found: one chain of key parts ("a.b.c", a table
// header's or a dotted key's) as it is scanned.
struct KeyChain {
  long line = 0;            // where it began
  int64_t parts = 0;        // 0: no chain open
  size_t longest = 0;       // bytes of its longest part
  bool header = false;      // inside "[...]" or "[[...]]" at the start of a line
  bool after_dot = false;   // its last part is followed by '.'
};


// The scan of check_shape(): the chain being read and where the scan is.
class ShapeScanner {
 public:
  ShapeScanner(const std::string& text, const std::string& path) : text_(text), path_(path), n_(text.size()) {}

  // Scans the whole text; throws as check_shape() does.
  void run() {
    i_ = text_.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // a UTF-8 byte order mark
    while (i_ < n_) step();
    end_chain('\0');
  }

 private:
  // Ends the chain; `next` is the character that ended it ('\0': none).
  // Throws nmt::Error "PATH:LINE: ..." for a chain of too many parts, or a
  // key with a part too long.
  void end_chain(char next) {
    if (chain_.parts == 0) return;
    if (chain_.parts > kConfigMaxKeyParts)
      throw Error(located(path_, chain_.line,
                          std::string(chain_.header ? "table header" : "dotted key") + " with " +
                              std::to_string(chain_.parts) + " dotted parts; nmt's config keys have at most " +
                              std::to_string(kConfigMaxKeyParts) + " (its options need a [table] and a key)"));
    const bool key = next == '=' || (chain_.header && next == ']');
    if (key && chain_.longest > kConfigMaxKeyBytes)
      throw Error(located(path_, chain_.line,
                          "key of " + std::to_string(chain_.longest) + " bytes; nmt's config keys have at most " +
                              std::to_string(kConfigMaxKeyBytes) + " (its option names are far shorter)"));
    chain_ = KeyChain{};
  }

  // A bare key, quoted key or value of `bytes` bytes was read.
  void part(size_t bytes) {
    if (chain_.parts > 0 && chain_.after_dot) {
      ++chain_.parts;
      chain_.after_dot = false;
      chain_.longest = std::max(chain_.longest, bytes);
      return;
    }
    end_chain('\0');
    chain_.line = line_;
    chain_.parts = 1;
    chain_.longest = bytes;
    chain_.header = header_pending_;
    header_pending_ = false;
  }

  static bool bare(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  }

  // The string opened by quote `c` at i_: a multi-line one is skipped (a
  // value, never a key), a one-line one is a part. Throws as end_chain().
  void string(char c) {
    const std::string& text = text_;
    const size_t n = n_;
    size_t& i = i_;
    const bool triple = i + 2 < n && text[i + 1] == c && text[i + 2] == c;
    if (triple) {  // a multi-line string: a value, never a key
      end_chain(c);
      i += 3;
      while (i < n) {
        if (text[i] == '\n') ++line_;
        if (c == '"' && text[i] == '\\' && i + 1 < n) {
          if (text[i + 1] == '\n') ++line_;
          i += 2;
          continue;
        }
        if (text[i] == c && i + 2 < n && text[i + 1] == c && text[i + 2] == c) {
          i += 3;
          for (int extra = 0; extra < 2 && i < n && text[i] == c; ++extra) ++i;  // """a"""" ends with a quote
          break;
        }
        ++i;
      }
      return;
    }
    const size_t begin = ++i;  // a one-line string: a quoted key or a value
    while (i < n && text[i] != c && text[i] != '\n') i += (c == '"' && text[i] == '\\' && i + 1 < n && text[i + 1] != '\n') ? 2 : 1;
    part(i - begin);
    if (i < n && text[i] == c) ++i;
  }

  // Reads what starts at i_ (a character, a comment, a string or a bare
  // run) and moves past it. Throws as end_chain().
  void step() {
    const std::string& text = text_;
    const size_t n = n_;
    size_t& i = i_;
    const char c = text[i];
    if (c == '\n') {
      end_chain('\n');
      ++line_;
      line_start_ = true;
      header_pending_ = false;
      ++i;
      return;
    }
    if (c == ' ' || c == '\t' || c == '\r') {  // may stand around the dots of a key
      ++i;
      return;
    }
    const bool was_line_start = line_start_;
    line_start_ = false;
    if (c == '#') {  // a comment, to the end of the line
      while (i < n && text[i] != '\n') ++i;
      return;
    }
    if (c == '"' || c == '\'') {
      string(c);
      return;
    }
    if (bare(c)) {
      const size_t begin = i;
      while (i < n && bare(text[i])) ++i;
      part(i - begin);
      return;
    }
    if (c == '.' && chain_.parts > 0 && !chain_.after_dot) {
      chain_.after_dot = true;
      ++i;
      return;
    }
    if (c == '[' && (was_line_start || (header_pending_ && i > 0 && text[i - 1] == '['))) {
      end_chain(c);
      header_pending_ = true;
      ++i;
      return;
    }
    end_chain(c);  // '=', ']', ',', '{', '}', a stray '.', ...
    ++i;
  }

  const std::string& text_;
  const std::string& path_;
  const size_t n_;
  KeyChain chain_;
  bool line_start_ = true;       // only whitespace so far on this line
  bool header_pending_ = false;  // "[" or "[[" opened this line; no part yet
  long line_ = 1;
  size_t i_ = 0;
};

}  // namespace

void check_shape(const std::string& text, const std::string& path) { ShapeScanner(text, path).run(); }

}  // namespace nmt
