// Alignments as data: attention matrices over tokens, their merge from
// SentencePiece pieces to words, hard (Pharaoh) links derived from them,
// gold links and Alignment Error Rate, and CSV and SVG output. No LibTorch:
// these parsers and writers are fuzzed and tested on their own.
#pragma once
#include <cstdint>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/options.h"

namespace nmt {

struct AttentionMatrix {
  std::vector<std::string> src_tokens;      // source pieces (or words), then "</s>"
  std::vector<std::string> tgt_tokens;      // target pieces (or words) emitted, then "</s>"
  std::vector<std::vector<float>> weights;  // [tgt_tokens][src_tokens]; each row sums to 1
};

// Merges pieces into words: a word starts at a piece beginning with U+2581
// (SentencePiece's word-start mark) and "</s>" stays a word of its own.
// Source columns of a word are summed and target rows of a word averaged, so
// rows still sum to 1. Word tokens are the pieces joined without the mark.
AttentionMatrix merge_to_words(const AttentionMatrix& pieces);

// The word (0-based) each SentencePiece piece belongs to: a piece starting
// with U+2581 starts a word (the first piece always does).
std::vector<int> piece_words(const std::vector<std::string>& pieces);

// A link (source word i, target word j), 0-based.
using Link = std::pair<int, int>;


// Hard alignment of a word-level matrix. Rows and columns of "</s>" never link.
std::set<Link> hard_alignment(const AttentionMatrix& words, HardMethod method, double threshold = 0.5);

// Moves attention rows up by `shift` (>= 0): target token t gets the row the
// model computed `shift` steps later; rows past the end repeat the last one
// ("</s>"). Row t is computed from the decoder state before y_{t-1} is read,
// so shift 2 gives the attention of the first state that has read y_t.
// Throws nmt::Error for a negative shift.
AttentionMatrix shift_rows(const AttentionMatrix& m, int shift);

// How the links of a source->target model and of a target->source model
// combine (Och & Ney 2003; Koehn et al. 2003, as in Moses' symal).

// (i, j) -> (j, i): a target->source model's links in source->target order.
std::set<Link> swap_links(const std::set<Link>& links);

// Combines forward links with reverse links already swapped into (source,
// target) order. kAverage and kNone return `fwd` (averaging works on the
// matrices: see average_with_reverse).
std::set<Link> symmetrize(const std::set<Link>& fwd, const std::set<Link>& rev, Symmetrization how);

// The word-level matrix (fwd + rev^T) / 2, where `rev` is the reverse
// model's word-level matrix of the same pair (its rows are fwd's columns).
// Throws nmt::Error if the two do not have matching words.
AttentionMatrix average_with_reverse(const AttentionMatrix& fwd, const AttentionMatrix& rev);

// "i-j i-j ..." sorted by i then j (fast_align's and Marian's format).
std::string to_pharaoh(const std::set<Link>& links);

// Gold links of one sentence pair: sure links are also possible.
struct GoldAlignment {
  std::set<Link> sure;
  std::set<Link> possible;  // includes every sure link
};

// Parses one line of gold links: "i-j" sure, "i?j" or "ipj" possible,
// separated by spaces; `one_based` subtracts 1 from every index (NAACL/talp
// files). Throws nmt::Error located at path:line for a malformed link.
GoldAlignment parse_gold_line(const std::string& line, const std::string& path, int64_t line_no, bool one_based);

// Precision, recall and Alignment Error Rate (Och & Ney 2003):
// P = |A∩P|/|A|, R = |A∩S|/|S|, AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|).
struct AerScore {
  int64_t hyp = 0, sure = 0, hyp_sure = 0, hyp_possible = 0;  // |A|, |S|, |A∩S|, |A∩P|
  double precision() const;
  double recall() const;
  double aer() const;
};
// Sums the counts over sentence pairs. Throws nmt::Error if the sizes differ.
AerScore alignment_error_rate(const std::vector<std::set<Link>>& hyp, const std::vector<GoldAlignment>& gold);

// One CSV block: a header row of source tokens (first cell empty), then one
// row per target token. Every token is quoted, with '"' doubled.
void write_csv(std::ostream& out, const AttentionMatrix& m);

// The long ("tidy") CSV form: one row per cell,
// pair,tgt_index,tgt_token,src_index,src_token,weight (indices 0-based,
// tokens quoted as in write_csv), preceded by that header row when `header`.
// The rows of several pairs form one table; each target token's weights sum
// to 1 like the matrix's rows.
void write_tidy_csv(std::ostream& out, const AttentionMatrix& m, size_t pair, bool header);

// Quotes a CSV field: "a""b" for a"b.
std::string csv_quote(const std::string& s);

// A standalone SVG heatmap: `title` (when not empty) above it, one cell per
// weight, grayscale (0 black, 1 white) with its colour scale, source tokens
// upright across the top and target tokens down the left, with axis titles.
// Pieces are shown without SentencePiece's mark: a gray "·" before a piece
// that continues a word, a gray "␣" for the mark alone, and a note at the
// bottom says so; each cell's tooltip names its pair of tokens. The picture
// is sized to hold every text at a generous estimate of its width (0.62 em
// a character, a full em for wide ones), so nothing is clipped. Never throws
// (beyond std::bad_alloc and the stream's own exceptions).
void write_svg(std::ostream& out, const AttentionMatrix& m, const std::string& title = "");

// Escapes &, <, >, " and ' for XML text and attributes.
std::string xml_escape(const std::string& s);

}  // namespace nmt
