// The stages of nmt-align's run (run_alignment() in align.cc puts them
// together): reading the pairs and gold links (align_input.cc), aligning a
// pair with ibm2, hmm or a model's attention (align_aligners.cc), and writing
// the results (align_output.cc). Private to those files.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "io/io.h"
#include "text/corpus.h"
#include "tools/align.h"

namespace nmt::align_detail {

// --- reading (align_input.cc) ------------------------------------------------

// The pairs to align; `tgt` is empty in free mode (the model translates).
struct Pairs {
  std::vector<std::string> src, tgt;
};

// The pairs to align, read one at a time: --src (and --tgt), --tsv or
// --pairs, or with none of them fast_align pairs from stdin; at most
// --max-pairs of them. Only the current line is held.
class PairInput {
 public:
  // Throws nmt::UsageError when there is no input option and stdin is a
  // terminal, nmt::Error for a file that cannot be opened.
  explicit PairInput(const AlignRunOptions& opt);

  // The next pair into *src and *tgt (empty in free mode: the model
  // translates); false after the last one. Throws nmt::Error located at
  // file:line for a line that is not valid text or longer than
  // kAlignMaxLineBytes, files of different line counts, or a pair with an
  // empty side.
  bool next(std::string* src, std::string* tgt);

 private:
  static std::string over_long() { return "line is longer than " + std::to_string(kAlignMaxLineBytes) + " bytes"; }
  int64_t max_pairs_ = 0, count_ = 0;
  std::unique_ptr<PairReader> pairs_;
  std::unique_ptr<LineReader> lines_;  // free mode: sources alone
  bool two_files_ = false;
};

// Every pair of `in` (what ibm2 and hmm learn from). Throws as PairInput::next().
Pairs read_all_pairs(PairInput& in);

// The gold links of --eval-gold, line k for pair k, read along with the
// pairs: the score sums their counts pair by pair.
class GoldInput {
 public:
  // Throws nmt::Error naming the file when it cannot be opened.
  explicit GoldInput(const AlignRunOptions& opt) : opt_(opt), in_(opt.eval_gold, kAlignMaxLineBytes) {}

  // The gold links of the next pair (`src`, and `tgt` unless empty in free
  // mode), checked to lie inside it; with no line left for it, `pairs`
  // (called then) counts the pairs in all. Throws nmt::Error located at
  // gold:line.
  GoldAlignment next(const std::string& src, const std::string& tgt, const std::function<int64_t()>& pairs);

 private:
  const AlignRunOptions& opt_;
  LineReader in_;
};

// What ibm2 and hmm learn from: `pairs`, then --ibm-train-src/-tgt's pairs when
// given. Throws nmt::Error (file and line) when those cannot be read.
Pairs ibm_training_pairs(const AlignRunOptions& opt, const Pairs& pairs);

// --- aligning (align_aligners.cc) --------------------------------------------

// One pair's alignment: hard links, and the matrix to show (attention only).
struct PairAlignment {
  std::set<Link> links;
  AttentionMatrix shown;
  bool has_matrix = false;  // false for ibm2 and hmm: links only
  bool free = false;        // the model translated: `translation` is what the links refer to
  std::string translation;
};

// What aligns one pair; `tgt` is empty in free mode.
class PairAligner {
 public:
  virtual ~PairAligner() = default;
  virtual PairAlignment align(const std::string& src, const std::string& tgt) = 0;
  // Every pair of `pairs`, in order (`pairs.tgt` empty in free mode); what
  // align() gives for each (an aligner may batch them: the same up to float
  // rounding). Throws as align().
  virtual std::vector<PairAlignment> align_all(const Pairs& pairs);
};

// "5 iterations", or "5 iterations of IBM model 2 and 5 of the HMM": what
// the statistical aligner's training runs, for the log.
std::string em_iterations(const WordAlignerOptions& o);

// ibm2 or hmm: learns from the pairs to align plus any extra pairs, in both
// directions when symmetrizing. --method threshold links where the link
// posterior reaches --threshold; --symmetrize average, where the mean of
// both directions' posteriors does (or, with argmax, each target word to
// its best source word by that mean).
class IbmPairAligner : public PairAligner {
 public:
  // Throws nmt::Error when the extra pairs cannot be read.
  IbmPairAligner(const AlignRunOptions& opt, const Pairs& pairs);
  PairAlignment align(const std::string& src, const std::string& tgt) override;

 private:
  // One direction's links, by --method.
  std::set<Link> links(const WordAligner& aligner, const std::string& src, const std::string& tgt) const;
  // The link posteriors as a word-level matrix (no "</s>").
  static AttentionMatrix posterior_matrix(const WordAligner& aligner, const std::string& src, const std::string& tgt);
  const AlignRunOptions& opt_;
  std::unique_ptr<WordAligner> fwd_, rev_;
};

// A model's attention, forced (given target) or free, optionally combined
// with a reverse model's.
class AttentionPairAligner : public PairAligner {
 public:
  // Loads -m (and --reverse-model) on the runtime's device. Throws
  // nmt::Error for a bad checkpoint, or a reverse model that translates in
  // -m's direction.
  explicit AttentionPairAligner(const AlignRunOptions& opt);
  bool has_reverse() const { return reverse_ != nullptr; }
  // Pairs with a side cut to --max-input-length so far.
  int64_t cropped() const { return cropped_; }
  // Throws nmt::Error for an empty side.
  PairAlignment align(const std::string& given_src, const std::string& given_tgt) override;
  // Forced mode: both models read the pairs in batches (forced_attention()).
  std::vector<PairAlignment> align_all(const Pairs& pairs) override;

 private:
  std::set<Link> hard(const AttentionMatrix& words) const { return hard_alignment(words, opt_.method, opt_.threshold); }
  // Cuts each side of a pair to whole words within --max-input-length
  // pieces of every model that reads it, so that both models see the same
  // words; counts the pair in cropped_ when a side was cut.
  void crop(std::string* src, std::string* tgt);
  // The pair's alignment from -m's matrix `m` (free: it translated; the
  // reverse model's matrix `reverse` when there is one).
  PairAlignment combine(AttentionMatrix m, const AttentionMatrix* reverse, bool free, std::string translation) const;
  const AlignRunOptions& opt_;
  std::unique_ptr<Translator> forward_, reverse_;
  int64_t cropped_ = 0;
};

// --- writing (align_output.cc) -----------------------------------------------

// Where alignments go: one stream (stdout or -o) unless everything goes
// into --output-dir, plus per-pair files in --output-dir and --heatmap.
// Nothing replaces the stream's file before commit().
class AlignmentSink {
 public:
  // Creates the folders and sweeps their stale temporaries. Throws
  // nmt::Error for a folder that cannot be created.
  explicit AlignmentSink(const AlignRunOptions& opt);
  // Writes pair k's alignment as --format says. Throws nmt::Error for a
  // per-pair file that cannot be written.
  void write(size_t k, const PairAlignment& a);
  // Replaces the output file, then removes the per-pair files an earlier,
  // longer run left in --output-dir and --heatmap beyond the `pairs` this run
  // wrote, so that the folder holds this run's pairs alone.
  void commit(size_t pairs);

 private:
  static std::string numbered(const std::string& dir, size_t k, const char* ext);
  static uint64_t pair_number(const std::string& name, const std::string& ext);
  static void remove_stale(const std::string& dir, const std::string& ext, size_t pairs);
  std::string heatmap_title(size_t k, const PairAlignment& a) const;
  static void write_file(const std::string& path, const std::function<void(std::ostream&)>& write);
  const AlignRunOptions& opt_;
  std::unique_ptr<OutputFile> out_;
};

// --format lex: ibm2 (or hmm) trained on the pairs (and --ibm-train-src/-tgt) cut
// into --model's pieces; its lexical table goes to --output as
// "source_piece<TAB>target_piece<TAB>t(f|e)" lines, each source piece's
// --lex-best most probable targets first (what nmt-translate --shortlist reads).
// Throws nmt::Error for a bad checkpoint, unreadable extra pairs or an
// output that cannot be written.
void write_lexical_table(const AlignRunOptions& opt, const Pairs& pairs);

}  // namespace nmt::align_detail
