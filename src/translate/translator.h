// Translation of whole sentences: tokenizes, sorts by length to cut padding,
// runs a Search over batches on the models' engines (engine/rnn_engine.h,
// built once per precision) and restores input order.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/rnn_engine.h"
#include "model/checkpoint.h"
#include "search/scorer.h"
#include "search/search.h"
#include "search/shortlist.h"

namespace nmt {

// A batch is also split so that the encoder states its search holds (beam
// size x sentences x source pieces) stay under this many bytes; a single
// sentence always runs.
constexpr int64_t kSearchStateBytes = int64_t{256} << 20;

// Not thread-safe: one caller at a time (nmt-serve gives each model one
// batcher thread). Between calls it keeps its engines and, while the search
// options, engines, shortlist and inference mode stay the same, its search and
// scorer, whose kept CUDA graphs and states two concurrent calls would share.
class Translator {
 public:
  // Uses `model` (moved to eval mode by translate calls) with its tokenizers.
  Translator(Seq2Seq model, Tokenizer src_tok, Tokenizer tgt_tok);
  explicit Translator(const LoadedModel& m) : Translator(m.model, m.src_tok, m.tgt_tok) {}
  // An ensemble: search and scores average the members' log-probabilities
  // per step (scorer.h), weighted by `weights` (one per member; empty: all
  // equal). Every member must use the first one's tokenizers; throws
  // nmt::Error naming (by `names`, when given) the first that does not, and
  // as normalized_weights() does.
  explicit Translator(const std::vector<LoadedModel>& members, const std::vector<std::string>& names = {},
                      std::vector<double> weights = {});

  // Translates `lines` and returns each line's hypotheses (best first), in
  // input order. Batches are cut longest first within opt's limits, and
  // smaller when that leaves CPU workers (batch_workers()) without one. Empty lines get one empty hypothesis without running the
  // model. The model's training/eval mode is restored afterwards. Throws
  // nmt::Error when opt.shortlist names a table that cannot be read.
  std::vector<std::vector<Hypothesis>> translate(const std::vector<std::string>& lines, const TranslateOptions& opt,
                                                 bool with_attention = false);
  // Best hypothesis of each line, detokenized.
  std::vector<std::string> translate_text(const std::vector<std::string>& lines, const TranslateOptions& opt);

  // Forced decoding: the log-probability of each target given its source
  // (summed over the target's tokens and EOS; an ensemble averages its
  // members' per-token log-probabilities), in input order. Empty lines are
  // scored as empty sentences. With `target_pieces`, adds the targets'
  // pieces (EOS not counted) to it. Throws nmt::Error if the sizes differ.
  std::vector<double> score(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
                            int64_t batch_sentences, int64_t* target_pieces = nullptr);

  // Best hypothesis as text; with `replace_unk`, each generated <unk> becomes
  // the source piece it attended to most (needs the hypothesis' attention).
  std::string detokenize(const Hypothesis& h, const std::string& src_line, bool replace_unk) const;

  // Source ids as the model reads them: pieces then EOS.
  std::vector<int64_t> encode_source(const std::string& line) const;
  // Inputs cropped to max_input_length so far.
  int64_t cropped_inputs() const { return cropped_; }
  // How many batches translate() runs at once, one thread each: 1 off the
  // CPU or for a single batch, else opt.parallel_batches (0: the intra-op
  // threads), at most the threads and the batches.
  static int64_t batch_workers(const TranslateOptions& opt, int64_t batches, const torch::Device& device);
  const Tokenizer& src_tokenizer() const { return src_tok_; }
  const Tokenizer& tgt_tokenizer() const { return tgt_tok_; }
  // The (first) model: what alignment reads attention from.
  Seq2Seq& model() { return models_.front(); }
  size_t ensemble_size() const { return models_.size(); }

 private:
  // opt.shortlist's table, read at the first translate() that names it and
  // kept while the options stay the same; null without one.
  std::shared_ptr<const Shortlist> shortlist_for(const ShortlistOptions& opt);
  // An engine per model computing in `precision`: the ones built before
  // while the precision and every model's parameters stay the same, else new
  // ones. Call with the models in eval mode. Throws nmt::Error as RnnEngine's
  // constructor.
  std::vector<std::shared_ptr<Engine>> engines(Precision precision);
  // The search and scorer of the previous call while its search options,
  // engines, shortlist and inference mode stay the same (a fixed-row search
  // on CUDA keeps its step graphs and their tensors, shape by shape, from one
  // call to the next: the windows of a stream, the batches of a server), else
  // new ones. Throws nmt::Error as make_search() and Scorer's constructor.
  struct KeptSearch {
    SearchOptions options;
    bool inference_mode = false;  // c10::InferenceMode's tensors change in place only inside it
    std::vector<std::shared_ptr<Engine>> engines;
    std::shared_ptr<const Shortlist> shortlist;
    std::unique_ptr<Search> search;
    std::unique_ptr<Scorer> scorer;
  };
  KeptSearch& kept_search(const SearchOptions& opt, const std::vector<std::shared_ptr<Engine>>& members,
                          const std::shared_ptr<const Shortlist>& shortlist);
  KeptSearch kept_;
  std::vector<Seq2Seq> models_;
  std::vector<double> weights_;  // the members' weights as given (empty: equal)
  std::vector<std::shared_ptr<RnnEngine>> engines_;
  Tokenizer src_tok_;
  Tokenizer tgt_tok_;
  int64_t cropped_ = 0;
  bool warned_precision_ = false;  // the warning of an emulated --int8/--bf16 was logged
  std::shared_ptr<const Shortlist> shortlist_;
};

}  // namespace nmt
