// Parallel corpus reader and validator.
#include "corpus.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "error.h"
#include "utf8.h"

namespace nmt {
namespace {

std::ifstream open_or_throw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(located(path, 0, std::string("cannot open: ") + std::strerror(errno)));
  return in;
}

// Adds the pair or counts why it was skipped.
void add_pair(ParallelCorpus& c, std::string src, std::string tgt, int64_t line, const CorpusLimits& limits) {
  ++c.stats.lines;
  if (src.empty() || tgt.empty()) { ++c.stats.empty; return; }
  if (src.size() > limits.max_line_bytes || tgt.size() > limits.max_line_bytes) { ++c.stats.too_long; return; }
  c.src.push_back(std::move(src));
  c.tgt.push_back(std::move(tgt));
  c.line.push_back(line);
  ++c.stats.kept;
}

}  // namespace

std::string CorpusStats::summary() const {
  return std::to_string(lines) + " pairs read, " + std::to_string(kept) + " kept (" + std::to_string(empty) +
         " empty, " + std::to_string(too_long) + " over-long)";
}

void validate_line(const std::string& raw, const std::string& path, int64_t line) {
  if (raw.find('\0') != std::string::npos)
    throw Error(located(path, line, "NUL byte at byte " + std::to_string(raw.find('\0') + 1) + " (binary file?)"));
  size_t bad = find_invalid_utf8(raw);
  if (bad != std::string_view::npos)
    throw Error(located(path, line, "invalid UTF-8 at byte " + std::to_string(bad + 1)));
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

std::string checked_line(const std::string& raw, const std::string& path, int64_t line) {
  validate_line(raw, path, line);
  return std::string(trim(raw));
}

ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path, const CorpusLimits& limits) {
  auto fs = open_or_throw(src_path);
  auto ft = open_or_throw(tgt_path);
  ParallelCorpus c;
  std::string a, b;
  int64_t line = 0;
  while (true) {
    bool has_a = static_cast<bool>(std::getline(fs, a));
    bool has_b = static_cast<bool>(std::getline(ft, b));
    ++line;
    if (!has_a && !has_b) break;
    if (has_a != has_b) {
      const std::string& longer = has_a ? src_path : tgt_path;
      const std::string& shorter = has_a ? tgt_path : src_path;
      throw Error(located(longer, line, "line has no partner: " + shorter + " has only " +
                                            std::to_string(line - 1) + " lines (line counts differ)"));
    }
    add_pair(c, checked_line(a, src_path, line), checked_line(b, tgt_path, line), line, limits);
  }
  if (fs.bad()) throw Error(located(src_path, line, "read error"));
  if (ft.bad()) throw Error(located(tgt_path, line, "read error"));
  return c;
}

ParallelCorpus read_tsv(const std::string& path, const CorpusLimits& limits) {
  auto in = open_or_throw(path);
  ParallelCorpus c;
  std::string raw;
  int64_t line = 0;
  while (std::getline(in, raw)) {
    ++line;
    if (trim(raw).empty()) {
      validate_line(raw, path, line);
      ++c.stats.lines;
      ++c.stats.empty;
      continue;
    }
    auto [src, tgt] = split_tsv_line(raw, path, line);
    add_pair(c, std::move(src), std::move(tgt), line, limits);
  }
  if (in.bad()) throw Error(located(path, line, "read error"));
  return c;
}

std::vector<std::string> read_lines(const std::string& path) {
  auto in = open_or_throw(path);
  std::vector<std::string> out;
  std::string raw;
  int64_t line = 0;
  while (std::getline(in, raw)) out.push_back(checked_line(raw, path, ++line));
  if (in.bad()) throw Error(located(path, line, "read error"));
  return out;
}

}  // namespace nmt
