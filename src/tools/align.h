// nmt-align's operations: the attention of a model reading a given target
// (forced) or producing its own translation (free), and the tool's run over
// a file of pairs. The matrices and their formats are in alignment.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "translate/translator.h"
#include "text/alignment.h"
#include "text/word_aligner.h"

namespace nmt {

// Attention of the model while it reads `tgt` as the translation of `src`
// (teacher forcing). Row t holds the weights the model used to emit target
// token t (they are computed from the state before t, so no offset is
// needed), or, for a model with an alignment head (ModelOptions::
// alignment_head), the head's weights for token t. Each side is cut to its
// first `max_pieces` pieces (0: never), as nmt-translate's
// --max-input-length does. Throws nmt::Error for an empty side.
AttentionMatrix forced_attention(Translator& tr, const std::string& src, const std::string& tgt,
                                 int64_t max_pieces = 0);

// forced_attention() of every pair (src[i], tgt[i]), computed in batches of
// pairs of similar length (one forward pass each, padded to its longest
// pair; at most kForcedAlignBatch pairs, and no more than fit
// kForcedAlignFloats, one pair whatever its size): the same matrices, in the
// same order, up to float rounding (the products have other row counts).
// Throws nmt::Error for an empty side, or sides of different counts, before
// any work.
std::vector<AttentionMatrix> forced_attention(Translator& tr, const std::vector<std::string>& src,
                                              const std::vector<std::string>& tgt, int64_t max_pieces = 0);

// Most pairs in one forward pass of the batched forced_attention().
constexpr size_t kForcedAlignBatch = 32;

// Most floats a batch of the batched forced_attention() may hold: rows
// times target positions times (the decoder's widths per position + source
// positions), its activations and weights (32 MiB). No logits are made.
constexpr int64_t kForcedAlignFloats = int64_t{1} << 23;

// Attention while the model translates `src` with `search` (greedy or beam),
// or for a model with an alignment head, the head's weights over the
// translation it made; with `translation`, also that translation, detokenized.
// The source is cut to its first `max_pieces` pieces (0: never).
AttentionMatrix free_attention(Translator& tr, const std::string& src, const SearchOptions& search = {},
                               std::string* translation = nullptr, int64_t max_pieces = 0);

// The attention of hypothesis `hyp`, which `tr` made translating `src` with
// attention (Translator::translate(..., with_attention = true)), over the
// source's first `max_pieces` pieces (0: all; as the translation was cropped)
// and the hypothesis' pieces, "</s>" on each side; for a model with an
// alignment head, the head's weights over that translation. What
// free_attention() gives for its translation. Never throws for a hypothesis
// of `tr` (beyond LibTorch's errors).
AttentionMatrix hypothesis_attention(Translator& tr, const std::string& src, const Hypothesis& hyp,
                                     int64_t max_pieces = 0);

// Cuts `text` after its last whole word whose pieces all lie within the
// first `max_pieces` pieces of every tokenizer of `tokenizers` (a word as
// merge_to_words() counts them, separated by whitespace in the text), so
// that a reverse model and the gold links see the same words; after its
// first word when even that one has more pieces (forced_attention() then
// cuts its pieces). Returns whether `text` was cut: not when every
// tokenizer's pieces number at most max_pieces, or max_pieces is 0.
bool crop_to_whole_words(std::string* text, const std::vector<const Tokenizer*>& tokenizers, int64_t max_pieces);

// Longest input line nmt-align reads, in bytes (longer: an error at file:line).
constexpr size_t kAlignMaxLineBytes = size_t{1} << 20;

// nmt-align reads, aligns (forced mode: in batches, see forced_attention())
// and writes up to kAlignChunk pairs at a time, fewer when their matrices
// could hold more than kAlignChunkCells weights: each pair counts (source
// bytes + 1) x (target bytes + 1), each side at most --max-input-length + 1
// (a piece has a byte at least), and a long pair goes with those read before it.
constexpr size_t kAlignChunk = 256;
constexpr size_t kAlignChunkCells = size_t{1} << 22;

// Aligns every pair and writes the chosen format; with eval_gold, logs
// precision, recall and AER. The attention aligner reads, aligns and writes
// a chunk of pairs at a time (kAlignChunk; memory does not grow with the
// input: with --max-input-length, nor with its lines), and logs a warning with the
// number of pairs it cropped; ibm2 and hmm learn from every pair, held in memory.
// Throws nmt::Error for bad options (before any work), bad files (named
// with the line; a gold link outside its sentence pair included), or a bad
// model; the output file (--output) is then left as it was, and per-pair
// files already written stay (each one complete).
AerScore run_alignment(const AlignRunOptions& opt);

}  // namespace nmt
