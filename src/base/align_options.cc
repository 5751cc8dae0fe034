// The checks of nmt-align's options (align_options.h) that are not plain
// ranges: the ranges come from the field lists, through check_ranges().
#include "base/align_options.h"

#include "base/check_ranges.h"
#include "base/error.h"

namespace nmt {

void WordAlignerOptions::validate() const { check_ranges(*this); }

AlignRunOptions AlignRunOptions::resolved() const {
  AlignRunOptions r = *this;
  if (aligner != Aligner::kAttention && given.count("format") == 0) r.format = AlignFormat::kPharaoh;
  r.ibm.hmm = aligner == Aligner::kHmm;
  return r;
}

void AlignRunOptions::validate() const {
  check_ranges(*this);  // ibm's, runtime's and --beam-size included (the rest of search: search.validate())
  runtime.validate();
  ibm.validate();
  search.validate();
  if (format == AlignFormat::kSvg && output_dir.empty() && heatmap_dir.empty())
    throw UsageError("--format svg writes one file per pair: give --output-dir");
  const bool ibm2 = aligner != Aligner::kAttention;  // a statistical aligner: ibm2 or hmm
  const std::string name = enum_name(aligner);
  if (format == AlignFormat::kLex) {
    if (!ibm2) throw UsageError("--format lex is a statistical aligner's lexical table: add --aligner ibm2 or hmm");
    if (model_path.empty()) throw UsageError("--format lex needs --model: the table is over that model's pieces");
    if (!reverse_model.empty() || symmetrize != Symmetrization::kNone || !eval_gold.empty() || !output_dir.empty() ||
        !heatmap_dir.empty())
      throw UsageError("--format lex writes one table: drop --reverse-model, --symmetrize, --eval-gold, "
                       "--output-dir and --heatmap");
  } else {
    if (ibm2 && format != AlignFormat::kPharaoh)
      throw UsageError("the " + name + " aligner gives hard links only: use --format pharaoh (or lex for its table)");
    if (ibm2 && (!model_path.empty() || !reverse_model.empty()))
      throw UsageError("the " + name + " aligner learns from the text: drop --model and --reverse-model");
    if (ibm2 && !heatmap_dir.empty())
      throw UsageError("the " + name + " aligner gives hard links only, no attention to draw: drop --heatmap");
  }
  if (!output_dir.empty()) {  // lex refused it above
    if (format == AlignFormat::kPharaoh)
      throw UsageError("--format pharaoh writes all its links to one output (-o, or stdout): drop --output-dir "
                       "(one file per pair is for csv, tidy and svg)");
    if (!output.empty() && output != "-")
      throw UsageError("--output-dir writes one file per pair, and the -o file would stay unwritten: drop -o");
  }
  const bool symmetric = symmetrize != Symmetrization::kNone;
  if (ibm.agreement && !ibm2) throw UsageError("--ibm-agreement is for the statistical aligners: add --aligner ibm2 or hmm");
  if (ibm.agreement && !symmetric)
    throw UsageError("--ibm-agreement trains both directions together: give --symmetrize (average, say)");
  if (!ibm2 && symmetric != !reverse_model.empty())
    throw UsageError("symmetrization needs both a reverse model and a method other than none");
  // The input: --src (with --tgt: forced mode), --tsv or --pairs; with none
  // of them, fast_align pairs on stdin (checked where they are read).
  const int inputs = !src.empty() + !tsv.empty() + !pairs.empty();
  if (inputs > 1) throw UsageError("give one input: --src (and --tgt), --tsv or --pairs");
  if (!tgt.empty() && src.empty()) throw UsageError("option --src is required with --tgt");
  const bool forced = !tgt.empty() || !tsv.empty() || !pairs.empty() || inputs == 0;
  if ((forced || ibm2) && search.beam_size != 1)
    throw UsageError("--beam-size does nothing when the target is given (--tgt, --tsv, --pairs, ibm2, hmm): it is for free "
                     "mode (--src alone)");
  if (!forced) {  // free mode: the model translates, so there is no given target
    if (ibm2) throw UsageError("option --tgt is required with --aligner " + name + " (it aligns given pairs)");
    if (!reverse_model.empty()) throw UsageError("option --tgt is required with --reverse-model (forced mode)");
  }
  if (!ibm2 && model_path.empty())
    throw UsageError("option --model (-m) is required: the checkpoint whose attention aligns (or --aligner ibm2 or "
                     "hmm, which need none)");
}

}  // namespace nmt
