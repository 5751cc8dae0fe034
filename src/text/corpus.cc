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

enum class PairForm { kTwoFiles, kTsv, kBars };

struct PairReader::Impl {
  PairForm form = PairForm::kTwoFiles;
  CorpusLimits limits;
  std::string src_path, tgt_path;  // as given (the same file for one-file forms)
  std::unique_ptr<LineReader> a, b;
  std::string raw_a, raw_b;
  int64_t line = 0;

  // Reads pairs of the one-file form `f` from `path`.
  void open_one(PairForm f, const std::string& path, const CorpusLimits& l) {
    form = f;
    limits = l;
    src_path = tgt_path = path;
    a = std::make_unique<LineReader>(path, read_cap(l, 2));
  }
};

PairReader::PairReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PairReader::PairReader(PairReader&&) noexcept = default;
PairReader& PairReader::operator=(PairReader&&) noexcept = default;
PairReader::~PairReader() = default;
const std::string& PairReader::src_name() const { return impl_->src_path; }
const std::string& PairReader::tgt_name() const { return impl_->tgt_path; }

PairReader PairReader::parallel(const std::string& src_path, const std::string& tgt_path, const CorpusLimits& limits) {
  auto impl = std::make_unique<Impl>();
  impl->form = PairForm::kTwoFiles;
  impl->limits = limits;
  impl->src_path = src_path;
  impl->tgt_path = tgt_path;
  impl->a = std::make_unique<LineReader>(src_path, read_cap(limits, 1));
  impl->b = std::make_unique<LineReader>(tgt_path, read_cap(limits, 1));
  return PairReader(std::move(impl));
}

PairReader PairReader::tsv(const std::string& path, const CorpusLimits& limits) {
  auto impl = std::make_unique<Impl>();
  impl->open_one(PairForm::kTsv, path, limits);
  return PairReader(std::move(impl));
}

PairReader PairReader::bar_pairs(const std::string& path, const CorpusLimits& limits) {
  auto impl = std::make_unique<Impl>();
  impl->open_one(PairForm::kBars, path, limits);
  return PairReader(std::move(impl));
}

bool PairReader::next(Pair* p) {
  Impl& r = *impl_;
  const size_t max = r.limits.max_line_bytes;
  p->over_long.clear();
  if (r.form == PairForm::kTwoFiles) {
    bool long_a = false, long_b = false;
    const bool has_a = r.a->next(&r.raw_a, &long_a);
    const bool has_b = r.b->next(&r.raw_b, &long_b);
    const int64_t line = ++r.line;
    if (!has_a && !has_b) return false;
    if (has_a != has_b) {
      const std::string& longer = has_a ? r.src_path : r.tgt_path;
      const std::string& shorter = has_a ? r.tgt_path : r.src_path;
      throw Error(located(longer, line, "line has no partner: " + shorter + " has only " +
                                            std::to_string(line - 1) + " lines (line counts differ)"));
    }
    p->src = checked_line(r.raw_a, r.src_path, line);
    p->tgt = checked_line(r.raw_b, r.tgt_path, line);
    p->line = line;
    long_a = long_a || p->src.size() > max;
    long_b = long_b || p->tgt.size() > max;
    if ((long_a || long_b) && !p->src.empty() && !p->tgt.empty())  // an empty side counts first
      p->over_long = long_a ? r.src_path : r.tgt_path;
    return true;
  }
  bool too_long = false;
  if (!r.a->next(&r.raw_a, &too_long)) return false;
  const int64_t line = r.a->line();
  const std::string& path = r.src_path;
  p->line = line;
  p->src.clear();
  p->tgt.clear();
  if (trim(r.raw_a).empty()) {
    validate_line(r.raw_a, path, line);
    return true;
  }
  if (too_long) {
    validate_line(r.raw_a, path, line);
    p->over_long = path;
    return true;
  }
  auto [src, tgt] = r.form == PairForm::kTsv ? split_tsv_line(r.raw_a, path, line) : split_bar_line(r.raw_a, path, line);
  if ((src.size() > max || tgt.size() > max) && !src.empty() && !tgt.empty()) p->over_long = path;
  p->src = std::move(src);
  p->tgt = std::move(tgt);
  return true;
}

namespace {

// Every pair of `in`, over-long ones counted (or refused, as limits say)
// and empty ones counted.
ParallelCorpus read_all(PairReader in, const CorpusLimits& limits) {
  ParallelCorpus c;
  PairReader::Pair p;
  while (in.next(&p)) {
    if (!p.over_long.empty()) {
      over_long(c, limits, p.over_long, p.line);
      continue;
    }
    add_pair(c, std::move(p.src), std::move(p.tgt), p.line, in.src_name(), in.tgt_name());
  }
  return c;
}

}  // namespace

ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path, const CorpusLimits& limits) {
  return read_all(PairReader::parallel(src_path, tgt_path, limits), limits);
}

ParallelCorpus read_tsv(const std::string& path, const CorpusLimits& limits) {
  return read_all(PairReader::tsv(path, limits), limits);
}

ParallelCorpus read_bar_pairs(const std::string& path, const CorpusLimits& limits) {
  return read_all(PairReader::bar_pairs(path, limits), limits);
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
