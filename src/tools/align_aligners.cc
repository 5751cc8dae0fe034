// nmt-align's aligners: ibm2 or hmm (trained on every pair first, then one
// pair at a time) and a model's attention, forced (pairs in batches) or free
// (one translation at a time), with or without a reverse model.
#include <spdlog/spdlog.h>

#include <cmath>
#include <utility>

#include "base/error.h"
#include "base/format.h"
#include "base/utf8.h"
#include "model/device.h"
#include "tools/align_pipeline.h"

namespace nmt::align_detail {
namespace {

// The pieces of a vocabulary, its reserved ones (pad, unk, bos, eos) left out.
std::set<std::string> vocabulary(const Tokenizer& tok) {
  std::set<std::string> out;
  for (int64_t id = kEosId + 1; id < tok.vocab_size(); ++id) out.insert(tok.piece(id));
  return out;
}

// |a and b| / |a or b|: 1 for the same pieces, 0 for none in common.
double shared_share(const std::set<std::string>& a, const std::set<std::string>& b) {
  size_t both = 0;
  for (const auto& p : a) both += b.count(p);
  const size_t either = a.size() + b.size() - both;
  return either == 0 ? 1.0 : static_cast<double>(both) / static_cast<double>(either);
}

// Throws nmt::Error when the model of --reverse-model translates in the
// direction of -m rather than back: its source vocabulary is nearer -m's
// source vocabulary than -m's target one, and its target nearer -m's target.
// (Two models trained apart have vocabularies of their own, so they are
// compared by the pieces they share.) Models with one vocabulary for both
// sides cannot tell the directions apart and pass.
void check_reverse_direction(const AlignRunOptions& opt, const Translator& fwd, const Translator& rev) {
  if (fwd.src_tokenizer().bytes() == fwd.tgt_tokenizer().bytes()) return;
  const auto fs = vocabulary(fwd.src_tokenizer()), ft = vocabulary(fwd.tgt_tokenizer());
  const auto rs = vocabulary(rev.src_tokenizer()), rt = vocabulary(rev.tgt_tokenizer());
  const double src_same = shared_share(rs, fs), src_back = shared_share(rs, ft);
  const double tgt_same = shared_share(rt, ft), tgt_back = shared_share(rt, fs);
  if (!(src_same > src_back && tgt_same > tgt_back)) return;
  const auto pct = [](double x) { return std::to_string(static_cast<int>(std::lround(100 * x))) + "%"; };
  throw Error(located(opt.reverse_model, 0,
                      "translates in the direction of -m " + excerpt(opt.model_path) + ", not back: its source "
                      "vocabulary shares " + pct(src_same) + " of its pieces with -m's source vocabulary and " +
                      pct(src_back) + " with -m's target one; --reverse-model takes the model trained from -m's "
                      "target language to its source language"));
}

}  // namespace

std::string em_iterations(const WordAlignerOptions& o) {
  const std::string ibm2 = counted(o.iterations, "iteration");
  const std::string both = o.agreement ? ", both directions in agreement" : "";
  return (o.hmm ? ibm2 + " of IBM model 2 and " + std::to_string(o.hmm_iterations) + " of the HMM" : ibm2) + both;
}

IbmPairAligner::IbmPairAligner(const AlignRunOptions& opt, const Pairs& pairs) : opt_(opt) {
  const Pairs all = ibm_training_pairs(opt, pairs);
  spdlog::info("{}: learning from {}, {}", enum_name(opt.aligner), counted(static_cast<int64_t>(all.src.size()), "pair"),
               em_iterations(opt.ibm));
  if (opt.ibm.agreement) {  // validate(): only with --symmetrize
    auto both = WordAligner::train_in_agreement(all.src, all.tgt, opt.ibm);
    fwd_ = std::make_unique<WordAligner>(std::move(both.first));
    rev_ = std::make_unique<WordAligner>(std::move(both.second));
    return;
  }
  fwd_ = std::make_unique<WordAligner>(WordAligner::train(all.src, all.tgt, opt.ibm));
  if (opt.symmetrize != Symmetrization::kNone)
    rev_ = std::make_unique<WordAligner>(WordAligner::train(all.tgt, all.src, opt.ibm));
}

std::set<Link> IbmPairAligner::links(const WordAligner& aligner, const std::string& src, const std::string& tgt) const {
  if (opt_.method == HardMethod::kArgmax) return aligner.align(src, tgt);
  return hard_alignment(posterior_matrix(aligner, src, tgt), HardMethod::kThreshold, opt_.threshold);
}

AttentionMatrix IbmPairAligner::posterior_matrix(const WordAligner& aligner, const std::string& src,
                                                 const std::string& tgt) {
  AttentionMatrix m;
  m.src_tokens = split_ws(src);
  m.tgt_tokens = split_ws(tgt);
  for (const auto& row : aligner.link_posteriors(src, tgt)) m.weights.emplace_back(row.begin(), row.end());
  return m;
}

PairAlignment IbmPairAligner::align(const std::string& src, const std::string& tgt) {
  PairAlignment a;
  if (opt_.symmetrize == Symmetrization::kAverage) {
    const auto mean = average_with_reverse(posterior_matrix(*fwd_, src, tgt), posterior_matrix(*rev_, tgt, src));
    a.links = hard_alignment(mean, opt_.method, opt_.threshold);
    return a;
  }
  a.links = links(*fwd_, src, tgt);
  if (rev_) a.links = symmetrize(a.links, swap_links(links(*rev_, tgt, src)), opt_.symmetrize);
  return a;
}

AttentionPairAligner::AttentionPairAligner(const AlignRunOptions& opt) : opt_(opt) {
  const auto device = start_runtime(opt.runtime);
  forward_ = std::make_unique<Translator>(load_checkpoint(opt.model_path, device));
  if (!opt.reverse_model.empty()) {
    reverse_ = std::make_unique<Translator>(load_checkpoint(opt.reverse_model, device));
    check_reverse_direction(opt, *forward_, *reverse_);
  }
}

std::vector<PairAlignment> PairAligner::align_all(const Pairs& pairs) {
  std::vector<PairAlignment> out;
  for (size_t i = 0; i < pairs.src.size(); ++i) out.push_back(align(pairs.src[i], pairs.tgt.empty() ? "" : pairs.tgt[i]));
  return out;
}

void AttentionPairAligner::crop(std::string* src, std::string* tgt) {
  const int64_t max = opt_.max_input_length;
  std::vector<const Tokenizer*> src_toks{&forward_->src_tokenizer()}, tgt_toks{&forward_->tgt_tokenizer()};
  if (reverse_) {
    src_toks.push_back(&reverse_->tgt_tokenizer());
    tgt_toks.push_back(&reverse_->src_tokenizer());
  }
  const bool cut_src = crop_to_whole_words(src, src_toks, max);
  const bool cut_tgt = !tgt->empty() && crop_to_whole_words(tgt, tgt_toks, max);
  if (cut_src || cut_tgt) ++cropped_;
}

PairAlignment AttentionPairAligner::align(const std::string& given_src, const std::string& given_tgt) {
  if (!given_tgt.empty()) return std::move(align_all(Pairs{{given_src}, {given_tgt}})[0]);
  // Free mode (never with a reverse model: AlignRunOptions::validate()).
  std::string src = given_src, tgt;
  crop(&src, &tgt);
  std::string translation;
  AttentionMatrix m = free_attention(*forward_, src, opt_.search, &translation, opt_.max_input_length);
  return combine(std::move(m), nullptr, true, std::move(translation));
}

std::vector<PairAlignment> AttentionPairAligner::align_all(const Pairs& given) {
  if (given.tgt.empty()) return PairAligner::align_all(given);  // free mode: one translation at a time
  Pairs pairs = given;
  for (size_t i = 0; i < pairs.src.size(); ++i) crop(&pairs.src[i], &pairs.tgt[i]);
  const int64_t max = opt_.max_input_length;
  auto fwd = forced_attention(*forward_, pairs.src, pairs.tgt, max);
  std::vector<AttentionMatrix> rev;
  // The reverse model reads the target as its source: its rows are our columns.
  if (reverse_) rev = forced_attention(*reverse_, pairs.tgt, pairs.src, max);
  std::vector<PairAlignment> out;
  for (size_t i = 0; i < fwd.size(); ++i) out.push_back(combine(std::move(fwd[i]), reverse_ ? &rev[i] : nullptr, false, ""));
  return out;
}

PairAlignment AttentionPairAligner::combine(AttentionMatrix m, const AttentionMatrix* reverse, bool free,
                                            std::string translation) const {
  PairAlignment a;
  a.free = free;
  a.translation = std::move(translation);
  if (opt_.shift > 0) m = shift_rows(m, opt_.shift);
  AttentionMatrix words = merge_to_words(m);
  if (reverse != nullptr) {
    const auto rev_words = merge_to_words(shift_rows(*reverse, opt_.shift));
    if (opt_.symmetrize == Symmetrization::kAverage) {
      words = average_with_reverse(words, rev_words);
      m = words;  // the averaged matrix is what gets shown
      a.links = hard(words);
    } else {
      a.links = symmetrize(hard(words), swap_links(hard(rev_words)), opt_.symmetrize);
    }
  } else {
    a.links = hard(words);
  }
  a.shown = opt_.level == AlignLevel::kWord ? std::move(words) : std::move(m);
  a.has_matrix = true;
  return a;
}

}  // namespace nmt::align_detail
