// Reading and validating parallel text: two aligned plain-text files, one
// TSV file, or one file of fast_align's "source ||| target" lines. Fatal problems (missing file, mismatched line counts, invalid
// UTF-8, NUL bytes, malformed TSV) throw nmt::Error naming the file and line;
// pairs that are merely unusable (empty or over-long) are skipped and counted.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace nmt {

struct CorpusLimits {
  size_t max_line_bytes = 1 << 16;  // a line is never held past this many bytes
  bool skip_over_long = true;       // skip longer pairs and count them; false: an error at file:line
};

struct CorpusStats {
  int64_t lines = 0;     // pairs read
  int64_t kept = 0;      // pairs returned
  int64_t empty = 0;     // skipped: one side empty (after trimming whitespace)
  int64_t empty_src = 0, empty_tgt = 0;  // of those, pairs with an empty source / target (both when both)
  std::string first_empty;  // "path:line" of the first empty side, for messages
  int64_t too_long = 0;  // skipped: a side longer than max_line_bytes
  std::string summary() const;  // "12000 pairs read, 11990 kept (10 empty, 0 over-long)"
};

struct ParallelCorpus {
  std::vector<std::string> src;  // trimmed source sentences
  std::vector<std::string> tgt;  // trimmed target sentences, same size
  std::vector<int64_t> line;     // 1-based input line of each kept pair
  CorpusStats stats;
};

// Pairs one at a time in input order, as read_parallel(), read_tsv() and
// read_bar_pairs() read them (they are built on it): nothing but the current
// line is held, so memory stays bounded by the limits however long the input.
class PairReader {
 public:
  // Line i of `src_path` with line i of `tgt_path` ("-": stdin).
  static PairReader parallel(const std::string& src_path, const std::string& tgt_path, const CorpusLimits& limits = {});
  // "source<TAB>target" lines.
  static PairReader tsv(const std::string& path, const CorpusLimits& limits = {});
  // fast_align's "source ||| target" lines ("-": stdin).
  static PairReader bar_pairs(const std::string& path, const CorpusLimits& limits = {});
  PairReader(PairReader&&) noexcept;
  PairReader& operator=(PairReader&&) noexcept;
  ~PairReader();

  struct Pair {
    std::string src, tgt;    // trimmed; either may be empty (an unusable pair)
    int64_t line = 0;        // 1-based input line
    std::string over_long;   // the file of a side longer than limits.max_line_bytes (src and tgt then
                             // hold nothing useful), "" when none is; a pair with an empty side is
                             // an empty pair first (two files)
  };
  // The next pair into *p; false at the end of the input. Throws nmt::Error
  // as read_parallel(), read_tsv() and read_bar_pairs() do, except for an
  // over-long line, which is left to the caller (Pair::over_long).
  bool next(Pair* p);
  // The files that sides are located in, for messages (the same file for one-file forms).
  const std::string& src_name() const;
  const std::string& tgt_name() const;

 private:
  struct Impl;
  explicit PairReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads line i of `src_path` with line i of `tgt_path` ("-": stdin). Throws
// nmt::Error when a file cannot be read, the line counts differ (naming the
// first line that has no partner), a line is not valid UTF-8 or holds a NUL
// byte (a UTF-16 file is named as such), or is over-long and
// limits.skip_over_long is false.
ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path,
                             const CorpusLimits& limits = {});

// Reads "source<TAB>target" lines. Throws nmt::Error as read_parallel does,
// and for a line without exactly one tab.
ParallelCorpus read_tsv(const std::string& path, const CorpusLimits& limits = {});

// Reads fast_align's "source ||| target" lines ("-": stdin). Throws
// nmt::Error as read_tsv does, and for a line without exactly one "|||".
ParallelCorpus read_bar_pairs(const std::string& path, const CorpusLimits& limits = {});

// Reads a monolingual file ("-": stdin; one sentence per line, empty lines
// kept as ""). Throws nmt::Error for unreadable files, invalid UTF-8, NUL
// bytes, or a line longer than max_line_bytes (located at path:line).
std::vector<std::string> read_lines(const std::string& path, size_t max_line_bytes = 1 << 20);

// Checks one line; throws nmt::Error located at path:line for invalid UTF-8
// or a NUL byte.
void validate_line(const std::string& raw, const std::string& path, int64_t line);

// Splits one "source<TAB>target" line into its trimmed fields, after
// validate_line() (a final CR is dropped). Throws nmt::Error located at
// path:line unless the line has exactly one tab.
std::pair<std::string, std::string> split_tsv_line(const std::string& raw, const std::string& path, int64_t line);

// Splits one "source ||| target" line (fast_align's input) into its trimmed
// sides, after validate_line(). Throws nmt::Error located at path:line
// unless the line holds exactly one "|||".
std::pair<std::string, std::string> split_bar_line(const std::string& raw, const std::string& path, int64_t line);

// validate_line(), then the line trimmed of surrounding whitespace (tabs
// included: split TSV fields before trimming).
std::string checked_line(const std::string& raw, const std::string& path, int64_t line);

}  // namespace nmt
