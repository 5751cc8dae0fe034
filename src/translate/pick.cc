// The pick from the beam's list after the search; see pick.h.
#include "translate/pick.h"

#include "translate/mbr.h"

namespace nmt {

TranslateOptions pick_search_options(const TranslateOptions& opt, const Rescorer* rescorer, const MbrOptions& mbr) {
  TranslateOptions search = opt;
  if (rescorer != nullptr || mbr.enabled()) search.search.n_best = search.search.beam_size;
  return search;
}

void pick_from_beam(Translator& tr, Rescorer* rescorer, const MbrOptions& mbr, const std::vector<std::string>& lines,
                    bool replace_unk, const TranslateOptions& opt, std::vector<std::vector<Hypothesis>>* hyps) {
  const auto n_best = static_cast<size_t>(opt.search.n_best);
  if (rescorer != nullptr) {
    // The search's scores are forced decoding's where it ran in float32 over the whole vocabulary.
    const bool search_scores_exact = !opt.int8 && !opt.bf16 && opt.shortlist.path.empty();
    // MBR weighs the whole reordered list; without it, n_best of it is kept.
    const size_t keep = mbr.enabled() ? static_cast<size_t>(opt.search.beam_size) : n_best;
    rescorer->rescore(tr, lines, hyps, replace_unk, opt.batch_sentences, keep, search_scores_exact);
  }
  if (mbr.enabled()) mbr_select(tr, lines, replace_unk, mbr, n_best, hyps);
}

}  // namespace nmt
