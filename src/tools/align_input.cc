// nmt-align's input: the pairs to align, read one at a time (or all of them
// for ibm2 and hmm), and the gold links of --eval-gold read along with them.
#include <unistd.h>

#include <climits>

#include "base/error.h"
#include "base/utf8.h"
#include "tools/align_pipeline.h"

namespace nmt::align_detail {

PairInput::PairInput(const AlignRunOptions& opt) : max_pairs_(opt.max_pairs) {
  const CorpusLimits limits{kAlignMaxLineBytes, false};
  const bool given = !opt.src.empty() || !opt.tsv.empty() || !opt.pairs.empty();
  if (!given && ::isatty(0))
    throw UsageError("nothing to align: give --src (and --tgt for forced mode), --tsv or --pairs, or pipe "
                     "fast_align's 'source ||| target' lines into nmt-align");
  if (!opt.tsv.empty()) {
    pairs_ = std::make_unique<PairReader>(PairReader::tsv(opt.tsv, limits));
  } else if (!given || !opt.pairs.empty()) {
    pairs_ = std::make_unique<PairReader>(PairReader::bar_pairs(given ? opt.pairs : "-", limits));
  } else if (opt.tgt.empty()) {
    lines_ = std::make_unique<LineReader>(opt.src, kAlignMaxLineBytes);
  } else {
    pairs_ = std::make_unique<PairReader>(PairReader::parallel(opt.src, opt.tgt, limits));
    two_files_ = true;
  }
}

bool PairInput::next(std::string* src, std::string* tgt) {
  if (max_pairs_ > 0 && count_ >= max_pairs_) return false;
  if (lines_) {
    std::string raw;
    bool too_long = false;
    if (!lines_->next(&raw, &too_long)) return false;
    if (too_long) throw Error(located(lines_->name(), lines_->line(), over_long()));
    *src = checked_line(raw, lines_->name(), lines_->line());
    tgt->clear();
  } else {
    PairReader::Pair p;
    if (!pairs_->next(&p)) return false;
    if (!p.over_long.empty()) throw Error(located(p.over_long, p.line, over_long()));
    if (p.src.empty() || p.tgt.empty())
      throw Error((p.src.empty() ? pairs_->src_name() : pairs_->tgt_name()) + ":" + std::to_string(p.line) +
                  (two_files_ ? ": empty line; every pair must have both sides"
                              : ": a pair with an empty side; every pair must have both"));
    *src = std::move(p.src);
    *tgt = std::move(p.tgt);
  }
  ++count_;
  return true;
}

Pairs read_all_pairs(PairInput& in) {
  Pairs p;
  std::string src, tgt;
  while (in.next(&src, &tgt)) {
    p.src.push_back(std::move(src));
    if (!tgt.empty()) p.tgt.push_back(std::move(tgt));
  }
  return p;
}

GoldAlignment GoldInput::next(const std::string& src, const std::string& tgt, const std::function<int64_t()>& pairs) {
  std::string raw;
  bool too_long = false;
  if (!in_.next(&raw, &too_long))
    throw Error(located(opt_.eval_gold, 0, std::to_string(in_.line()) + " gold lines for " +
                                              std::to_string(pairs()) + " pairs"));
  const int64_t line = in_.line();
  if (too_long)
    throw Error(located(in_.name(), line, "line is longer than " + std::to_string(kAlignMaxLineBytes) + " bytes"));
  GoldAlignment gold = parse_gold_line(checked_line(raw, in_.name(), line), opt_.eval_gold, line, opt_.gold_one_based);
  const auto ns = static_cast<int>(split_ws(src).size());
  const int nt = tgt.empty() ? INT32_MAX : static_cast<int>(split_ws(tgt).size());
  for (const auto& [i, j] : gold.possible)
    if (i >= ns || j >= nt)
      throw Error(located(opt_.eval_gold, line, "link " + std::to_string(i + opt_.gold_one_based) + "-" +
                                                    std::to_string(j + opt_.gold_one_based) + " is outside the pair (" +
                                                    std::to_string(ns) + " source" +
                                                    (tgt.empty() ? "" : " and " + std::to_string(nt) + " target") +
                                                    " words)"));
  return gold;
}

Pairs ibm_training_pairs(const AlignRunOptions& opt, const Pairs& pairs) {
  Pairs all = pairs;
  if (opt.ibm_train_src.empty() && opt.ibm_train_tgt.empty()) return all;
  auto extra = read_parallel(opt.ibm_train_src, opt.ibm_train_tgt, CorpusLimits{kAlignMaxLineBytes, false});
  all.src.insert(all.src.end(), std::make_move_iterator(extra.src.begin()), std::make_move_iterator(extra.src.end()));
  all.tgt.insert(all.tgt.end(), std::make_move_iterator(extra.tgt.begin()), std::make_move_iterator(extra.tgt.end()));
  return all;
}

}  // namespace nmt::align_detail
