// nmt-align's run: reads the pairs, aligns each one and writes it, scoring
// against gold links on the way (see align.h). The stages are in
// align_pipeline.h; the attention matrices in align_attention.cc.
#include "tools/align.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
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

namespace {

// The pairs to align, kAlignChunk at a time: the pairs held for ibm2 and
// hmm, else the input's; with their gold links when scoring.
class ChunkReader {
 public:
  // `max_pieces`: --max-input-length (0: none).
  ChunkReader(PairInput& input, const Pairs* all, GoldInput* gold, int64_t max_pieces)
      : input_(input), all_(all), gold_(gold), side_cap_(max_pieces > 0 ? static_cast<size_t>(max_pieces) + 1 : SIZE_MAX) {}

  // The next pairs (at most kAlignChunk, and no more once their matrices
  // could hold kAlignChunkCells weights; targets empty in free mode) into
  // *chunk, and their gold links into *golds; false when none is left.
  // Throws as PairInput::next() and GoldInput::next().
  bool next(Pairs* chunk, std::vector<GoldAlignment>* golds) {
    chunk->src.clear();
    chunk->tgt.clear();
    golds->clear();
    std::string src, tgt;
    size_t cells = 0;
    while (chunk->src.size() < kAlignChunk && cells < kAlignChunkCells && next_pair(&src, &tgt)) {
      cells += std::min(src.size() + 1, side_cap_) * std::min(tgt.size() + 1, side_cap_);
      if (gold_) {
        golds->push_back(gold_->next(src, tgt, [&] {  // the gold file ends early: count every pair, to say so
          auto n = static_cast<int64_t>(read_);
          std::string s, t;
          while (next_pair(&s, &t)) ++n;
          return n;
        }));
      }
      chunk->src.push_back(src);
      if (!tgt.empty()) chunk->tgt.push_back(tgt);
    }
    return !chunk->src.empty();
  }

 private:
  bool next_pair(std::string* src, std::string* tgt) {
    if (all_ != nullptr) {
      if (read_ >= all_->src.size()) return false;
      *src = all_->src[read_];
      *tgt = all_->tgt.empty() ? std::string() : all_->tgt[read_];
    } else if (!input_.next(src, tgt)) {
      return false;
    }
    ++read_;
    return true;
  }

  PairInput& input_;
  const Pairs* all_;
  GoldInput* gold_;
  size_t side_cap_;  // most pieces a side keeps, </s> included
  size_t read_ = 0;  // pairs read so far
};

// Adds one pair's link counts to the total.
void add(AerScore* total, const AerScore& one) {
  total->hyp += one.hyp;
  total->sure += one.sure;
  total->hyp_sure += one.hyp_sure;
  total->hyp_possible += one.hyp_possible;
}

}  // namespace

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
  // attention aligner reads, aligns and writes kAlignChunk pairs at a time.
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
  std::unique_ptr<GoldInput> gold;
  if (!opt.eval_gold.empty()) gold = std::make_unique<GoldInput>(opt);
  ChunkReader reader(input, all.get(), gold.get(), opt.max_input_length);
  std::unique_ptr<AlignmentSink> sink;  // opened once the first pair is aligned (or at the end, for none)
  AerScore score;
  size_t k = 0;  // pairs written so far
  Pairs chunk;
  std::vector<GoldAlignment> golds;
  while (reader.next(&chunk, &golds)) {
    const auto aligned = aligner->align_all(chunk);
    for (size_t i = 0; i < aligned.size(); ++i, ++k) {
      if (gold) add(&score, alignment_error_rate({aligned[i].links}, {golds[i]}));
      if (!sink) sink = std::make_unique<AlignmentSink>(opt);
      sink->write(k, aligned[i]);
    }
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
