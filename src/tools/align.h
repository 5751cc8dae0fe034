// nmt-align's operations: the attention of a model reading a given target
// (forced) or producing its own translation (free), and the tool's run over
// a file of pairs. The matrices and their formats are in alignment.h.
#pragma once
#include <string>

#include "search/translator.h"
#include "text/alignment.h"
#include "text/word_aligner.h"

namespace nmt {

// Attention of the model while it reads `tgt` as the translation of `src`
// (teacher forcing). Row t holds the weights the model used to emit target
// token t (they are computed from the state before t, so no offset is
// needed), or, for a model with an alignment head (ModelOptions::
// alignment_head), the head's weights for token t. Throws nmt::Error for an
// empty side.
AttentionMatrix forced_attention(Translator& tr, const std::string& src, const std::string& tgt);

// Attention while the model translates `src` with `search` (greedy or beam),
// or for a model with an alignment head, the head's weights over the
// translation it made; with `translation`, also that translation, detokenized.
AttentionMatrix free_attention(Translator& tr, const std::string& src, const SearchOptions& search = {},
                               std::string* translation = nullptr);

// Longest input line nmt-align reads, in bytes (longer: an error at file:line).
constexpr size_t kAlignMaxLineBytes = size_t{1} << 20;

// Aligns every pair and writes the chosen format; with eval_gold, logs
// precision, recall and AER. Throws nmt::Error for bad options (before any
// work), bad files (named with the line; a gold link outside its sentence
// pair included), or a bad model; output files are then left as they were.
AerScore run_alignment(const AlignRunOptions& opt);

}  // namespace nmt
