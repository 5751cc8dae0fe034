// How a translation is picked from the beam's list once the search is done,
// the same way in nmt-translate and nmt-serve: rescoring models reorder the
// whole list by their mix (rescorer.h), then minimum Bayes risk reorders it
// by expected utility (mbr.h); the first `n_best` are kept.
#pragma once
#include <string>
#include <vector>

#include "base/translate_options.h"
#include "search/search.h"
#include "translate/rescorer.h"
#include "translate/translator.h"

namespace nmt {

// The search options a pick needs: `opt` with the beam's whole list kept
// (n_best = beam_size) when `rescorer` (null: none) or `mbr` reorders it.
TranslateOptions pick_search_options(const TranslateOptions& opt, const Rescorer* rescorer, const MbrOptions& mbr);

// Reorders each line's list (`hyps[i]`, the search of `lines[i]` by `tr`
// under pick_search_options()) by `rescorer`'s mix when there is one, then
// by `mbr`'s expected utility when it is on, and keeps the first
// opt.search.n_best. The texts are tr.detokenize()'s with `replace_unk`, as
// the output writes them. `opt` is what the search was asked for: its
// batch size runs the forced decoding, and its precision and shortlist say
// whether the search's scores are forced decoding's. Throws nmt::Error as
// Rescorer::rescore() and mbr_select() do.
void pick_from_beam(Translator& tr, Rescorer* rescorer, const MbrOptions& mbr, const std::vector<std::string>& lines,
                    bool replace_unk, const TranslateOptions& opt, std::vector<std::vector<Hypothesis>>* hyps);

}  // namespace nmt
