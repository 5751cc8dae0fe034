// Parallel corpus reader and validator.
#include "text/corpus.h"

#include <cstdint>

#include "base/error.h"
#include "base/format.h"
#include "base/utf8.h"
#include "io/io.h"

namespace nmt {
namespace {

// Adds the pair or counts why it was skipped; `where` names its two sides.
void add_pair(ParallelCorpus& c, std::string src, std::string tgt, int64_t line, const std::string& src_where,
              const std::string& tgt_where) {
  ++c.stats.lines;
  if (src.empty() || tgt.empty()) {
    ++c.stats.empty;
    c.stats.empty_src += src.empty();
    c.stats.empty_tgt += tgt.empty();
    if (c.stats.first_empty.empty()) c.stats.first_empty = (src.empty() ? src_where : tgt_where) + ":" + std::to_string(line);
    return;
  }
  c.src.push_back(std::move(src));
  c.tgt.push_back(std::move(tgt));
  c.line.push_back(line);
  ++c.stats.kept;
}

// Bytes a reader keeps of a line holding `sides` fields of at most
// limits.max_line_bytes each: room for a tab and surrounding whitespace,
// which do not count against the limit.
size_t read_cap(const CorpusLimits& limits, size_t sides) {
  const size_t slack = 1024;
  if (limits.max_line_bytes > (SIZE_MAX - slack) / sides) return SIZE_MAX;
  return sides * limits.max_line_bytes + slack;
}

// Counts an over-long pair, or throws when they are not to be skipped.
void over_long(ParallelCorpus& c, const CorpusLimits& limits, const std::string& path, int64_t line) {
  if (!limits.skip_over_long)
    throw Error(located(path, line, "line is longer than " + std::to_string(limits.max_line_bytes) + " bytes"));
  ++c.stats.lines;
  ++c.stats.too_long;
}

}  // namespace

std::string CorpusStats::summary() const {
  return counted(lines, "pair") + " read, " + std::to_string(kept) + " kept (" + std::to_string(empty) + " empty, " +
         std::to_string(too_long) + " over-long)";
}

void validate_line(const std::string& raw, const std::string& path, int64_t line) {
  const size_t nul = raw.find('\0');
  if (nul != std::string::npos) throw Error(located(path, line, nul_byte_problem(raw, nul, path)));
  // Old Mac files end lines with CR alone: the whole file reads as its first
  // line. (A CR before the LF, or several, is a CRLF file: accepted.)
  if (line == 1) {
    const size_t end = raw.find_last_not_of('\r');
    if (end != std::string::npos && raw.find('\r') < end)
      throw Error(located(path, 0, "line endings are CR only (old Mac), so the file reads as one line; convert it "
                                   "first: tr '\\r' '\\n' < " + path + " > " + path + ".lf"));
  }
  size_t bad = find_invalid_utf8(raw);
  if (bad != std::string_view::npos) {
    if (line == 1 && looks_like_utf16(raw)) throw Error(located(path, line, utf16_advice(path)));
    throw Error(located(path, line, "invalid UTF-8 at byte " + std::to_string(bad + 1)));
  }
}

std::pair<std::string, std::string> split_tsv_line(const std::string& raw, const std::string& path, int64_t line) {
  validate_line(raw, path, line);
  std::string_view v(raw);
  if (!v.empty() && v.back() == '\r') v.remove_suffix(1);
  // Split before trimming: an empty side must not take the tab with it.
  const size_t tab = v.find('\t');
  if (tab == std::string_view::npos || v.find('\t', tab + 1) != std::string_view::npos)
    throw Error(located(path, line, "expected exactly one tab (source<TAB>target)"));
  return {std::string(trim(v.substr(0, tab))), std::string(trim(v.substr(tab + 1)))};
}

std::pair<std::string, std::string> split_bar_line(const std::string& raw, const std::string& path, int64_t line) {
  validate_line(raw, path, line);
  const std::string_view v(raw);
  const size_t bars = v.find("|||");
  if (bars == std::string_view::npos || v.find("|||", bars + 3) != std::string_view::npos)
    throw Error(located(path, line, "expected one ' ||| ' between source and target (fast_align's form)"));
  return {std::string(trim(v.substr(0, bars))), std::string(trim(v.substr(bars + 3)))};
}

std::string checked_line(const std::string& raw, const std::string& path, int64_t line) {
  validate_line(raw, path, line);
  return std::string(trim(raw));
}

ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path, const CorpusLimits& limits) {
  LineReader fs(src_path, read_cap(limits, 1)), ft(tgt_path, read_cap(limits, 1));
  ParallelCorpus c;
  std::string a, b;
  bool long_a = false, long_b = false;
  int64_t line = 0;
  while (true) {
    const bool has_a = fs.next(&a, &long_a);
    const bool has_b = ft.next(&b, &long_b);
    ++line;
    if (!has_a && !has_b) break;
    if (has_a != has_b) {
      const std::string& longer = has_a ? src_path : tgt_path;
      const std::string& shorter = has_a ? tgt_path : src_path;
      throw Error(located(longer, line, "line has no partner: " + shorter + " has only " +
                                            std::to_string(line - 1) + " lines (line counts differ)"));
    }
    auto src = checked_line(a, src_path, line), tgt = checked_line(b, tgt_path, line);
    long_a = long_a || src.size() > limits.max_line_bytes;
    long_b = long_b || tgt.size() > limits.max_line_bytes;
    if ((long_a || long_b) && !src.empty() && !tgt.empty()) {  // an empty side counts first
      over_long(c, limits, long_a ? src_path : tgt_path, line);
      continue;
    }
    add_pair(c, std::move(src), std::move(tgt), line, src_path, tgt_path);
  }
  return c;
}

namespace {

// Reads one pair per line of `path`, each split by `split` (split_tsv_line
// or split_bar_line): read_tsv and read_bar_pairs.
template <class Split>
ParallelCorpus read_pair_lines(const std::string& path, const CorpusLimits& limits, Split split) {
  LineReader in(path, read_cap(limits, 2));
  ParallelCorpus c;
  std::string raw;
  bool too_long = false;
  while (in.next(&raw, &too_long)) {
    const int64_t line = in.line();
    if (trim(raw).empty()) {
      validate_line(raw, path, line);
      add_pair(c, "", "", line, path, path);
      continue;
    }
    if (too_long) {
      validate_line(raw, path, line);
      over_long(c, limits, path, line);
      continue;
    }
    auto [src, tgt] = split(raw, path, line);
    if ((src.size() > limits.max_line_bytes || tgt.size() > limits.max_line_bytes) && !src.empty() && !tgt.empty()) {
      over_long(c, limits, path, line);
      continue;
    }
    add_pair(c, std::move(src), std::move(tgt), line, path, path);
  }
  return c;
}

}  // namespace

ParallelCorpus read_tsv(const std::string& path, const CorpusLimits& limits) {
  return read_pair_lines(path, limits, split_tsv_line);
}

ParallelCorpus read_bar_pairs(const std::string& path, const CorpusLimits& limits) {
  return read_pair_lines(path, limits, split_bar_line);
}

std::vector<std::string> read_lines(const std::string& path, size_t max_line_bytes) {
  LineReader in(path, max_line_bytes);
  std::vector<std::string> out;
  std::string raw;
  bool too_long = false;
  while (in.next(&raw, &too_long)) {
    if (too_long)
      throw Error(located(in.name(), in.line(), "line is longer than " + std::to_string(max_line_bytes) + " bytes"));
    out.push_back(checked_line(raw, in.name(), in.line()));
  }
  return out;
}

}  // namespace nmt
