// nmt-align's run: reads the pairs, aligns each one and writes it, scoring
// against gold links on the way (see align.h). The stages are in
// align_pipeline.h; the attention matrices in align_attention.cc.
#include "tools/align.h"

#include <spdlog/spdlog.h>

#include <memory>

#include "base/format.h"
#include "model/device.h"
#include "tools/align_pipeline.h"

namespace nmt {

using align_detail::AlignmentSink;
using align_detail::AttentionPairAligner;
using align_detail::GoldInput;
using align_detail::IbmPairAligner;
using align_detail::PairAligner;
using align_detail::PairInput;
using align_detail::Pairs;
using align_detail::read_all_pairs;
using align_detail::write_lexical_table;

AerScore run_alignment(const AlignRunOptions& options) {
  const AlignRunOptions opt = options.resolved();
  opt.validate();  // -m, and the target where the mode needs one, are there
  const bool ibm = opt.aligner != Aligner::kAttention;  // ibm2 or hmm
  std::unique_ptr<AttentionPairAligner> attention;
  if (ibm) {
    set_threads(opt.runtime.threads);
  } else {
    attention = std::make_unique<AttentionPairAligner>(opt);
  }
  PairInput input(opt);
  // ibm2 and hmm learn from every pair before they align any: all are held. The
  // attention aligner reads, aligns and writes one pair at a time.
  std::unique_ptr<Pairs> all;
  std::unique_ptr<PairAligner> aligner;
  if (ibm) {
    all = std::make_unique<Pairs>(read_all_pairs(input));
    if (opt.format == AlignFormat::kLex) {
      write_lexical_table(opt, *all);
      return AerScore{};
    }
    aligner = std::make_unique<IbmPairAligner>(opt, *all);
  } else {
    aligner = std::move(attention);
  }
  const AttentionPairAligner* cropping = ibm ? nullptr : static_cast<const AttentionPairAligner*>(aligner.get());
  size_t k = 0;  // pairs read so far
  auto next = [&](std::string* src, std::string* tgt) {
    if (!all) return input.next(src, tgt);
    if (k >= all->src.size()) return false;
    *src = all->src[k];
    *tgt = all->tgt.empty() ? std::string() : all->tgt[k];
    return true;
  };
  std::unique_ptr<GoldInput> gold;
  if (!opt.eval_gold.empty()) gold = std::make_unique<GoldInput>(opt);
  std::unique_ptr<AlignmentSink> sink;  // opened once the first pair is aligned (or at the end, for none)
  AerScore score;
  std::string src, tgt;
  while (next(&src, &tgt)) {
    GoldAlignment g;
    if (gold) {
      g = gold->next(src, tgt, [&] {  // the gold file ends early: count every pair, to say so
        int64_t n = static_cast<int64_t>(k) + 1;
        std::string s, t;
        for (++k; next(&s, &t); ++k) ++n;
        return n;
      });
    }
    const auto a = aligner->align(src, tgt);
    if (gold) {
      const AerScore one = alignment_error_rate({a.links}, {g});
      score.hyp += one.hyp;
      score.sure += one.sure;
      score.hyp_sure += one.hyp_sure;
      score.hyp_possible += one.hyp_possible;
    }
    if (!sink) sink = std::make_unique<AlignmentSink>(opt);
    sink->write(k, a);
    ++k;
  }
  if (!sink) sink = std::make_unique<AlignmentSink>(opt);
  sink->commit(k);
  if (cropping != nullptr && cropping->cropped() > 0)
    spdlog::warn("{} with a side longer than {} pieces {} cropped (--max-input-length)",
                 counted(cropping->cropped(), "pair"), opt.max_input_length, cropping->cropped() == 1 ? "was" : "were");
  if (gold && k > 0)
    spdlog::info("alignment vs {}: precision {:.4f} recall {:.4f} AER {:.4f} ({}, {}, {})", opt.eval_gold,
                 score.precision(), score.recall(), score.aer(), counted(score.hyp, "link"),
                 counted(score.sure, "sure gold link"), counted(static_cast<int64_t>(k), "pair"));
  return score;
}

}  // namespace nmt
