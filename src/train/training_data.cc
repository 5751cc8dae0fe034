// Reading and encoding training data; sampled segmentations per batch.
#include "train/training_data.h"

#include "base/error.h"
#include "text/alignment.h"

namespace nmt {
namespace {

// The piece-level links of one pair (see encode_corpus).
std::vector<std::pair<int32_t, int32_t>> guide_links(const std::string& line, const std::string& path, int64_t line_no,
                                                     const std::vector<int>& src_words,
                                                     const std::vector<int>& tgt_words) {
  const auto links = parse_gold_line(line, path, line_no, false).possible;
  const int ns = src_words.empty() ? 0 : src_words.back() + 1, nt = tgt_words.empty() ? 0 : tgt_words.back() + 1;
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const auto& [i, j] : links) {
    if (i < 0 || j < 0 || i >= ns || j >= nt)
      throw Error(located(path, line_no, "link " + std::to_string(i) + "-" + std::to_string(j) + " is outside a pair of " +
                                             std::to_string(ns) + " and " + std::to_string(nt) + " words"));
    for (size_t s = 0; s < src_words.size(); ++s)
      if (src_words[s] == i)
        for (size_t t = 0; t < tgt_words.size(); ++t)
          if (tgt_words[t] == j) out.emplace_back(static_cast<int32_t>(s), static_cast<int32_t>(t));
  }
  return out;
}

}  // namespace

ParallelCorpus read_corpus(const std::string& src, const std::string& tgt, const std::string& tsv, const char* what) {
  if (!tsv.empty()) {
    if (!src.empty() || !tgt.empty())
      throw UsageError(std::string("give the ") + what + " data as two files or one TSV, not both");
    return read_tsv(tsv);
  }
  if (src.empty() || tgt.empty())  // TrainOptions::validate() names the missing option first
    throw UsageError(std::string("no ") + what + " data: give --" + what + "-src and --" + what + "-tgt, or --" + what +
                     "-tsv");
  return read_parallel(src, tgt);
}

void require_usable(const ParallelCorpus& corpus, const std::string& src, const std::string& tgt, const std::string& tsv) {
  if (!corpus.src.empty()) return;
  const auto& st = corpus.stats;
  const bool target = tsv.empty() && st.lines > 0 && st.empty_tgt == st.empty && st.empty_src == 0 && st.too_long == 0;
  throw Error(located(!tsv.empty() ? tsv : target ? tgt : src, 0, "no usable training pairs (" + st.summary() + ")"));
}

EncodedCorpus encode_corpus(const ParallelCorpus& c, const Tokenizer& st, const Tokenizer& tt, int64_t max_src,
                            int64_t max_tgt, const std::vector<std::string>* guide, const std::string& guide_path) {
  EncodedCorpus out;
  out.examples.reserve(c.src.size());
  for (size_t i = 0; i < c.src.size(); ++i) {
    Example e;
    e.src = st.encode(c.src[i]);
    e.tgt = tt.encode(c.tgt[i]);
    if (static_cast<int64_t>(e.src.size()) > max_src || static_cast<int64_t>(e.tgt.size()) > max_tgt || e.src.empty() ||
        e.tgt.empty()) {
      ++out.skipped;
      continue;
    }
    if (guide != nullptr) {
      const int64_t line = c.line[i];
      e.guide = guide_links((*guide)[line - 1], guide_path, line, piece_words(st.pieces(c.src[i])),
                            piece_words(tt.pieces(c.tgt[i])));
    }
    e.src.push_back(kEosId);
    out.examples.push_back(std::move(e));
    out.kept.push_back(static_cast<int64_t>(i));
  }
  return out;
}

std::vector<Example> SegmentationSampler::sample(const std::vector<Example>& examples,
                                                 const std::vector<int64_t>& indices, uint64_t seed,
                                                 int64_t epoch) const {
  std::vector<Example> sampled;
  sampled.reserve(indices.size());
  for (int64_t i : indices) {
    Example e = examples[i];
    const uint64_t base = seed * 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(epoch) * 0xC2B2AE3D27D4EB4FULL ^
                          static_cast<uint64_t>(i) * 2;
    auto src = src_tok->sample((*text)[i].first, nbest, alpha, base);
    auto tgt = tgt_tok->sample((*text)[i].second, nbest, alpha, base + 1);
    if (!src.empty() && !tgt.empty() && static_cast<int64_t>(src.size()) <= max_src &&
        static_cast<int64_t>(tgt.size()) <= max_tgt) {
      e.src = std::move(src);
      e.src.push_back(kEosId);
      e.tgt = std::move(tgt);
    }
    sampled.push_back(std::move(e));
  }
  return sampled;
}

}  // namespace nmt
