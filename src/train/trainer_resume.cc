// What a resumed run keeps from its checkpoint and what it takes from the
// options: its vocabularies are fixed (an option that contradicts them is
// refused), and its learning rate goes on from the checkpoint's unless the
// options change it.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string>

#include "base/config.h"
#include "base/error.h"
#include "base/format.h"
#include "train/distributed.h"
#include "train/trainer_impl.h"

namespace nmt {

// The vocabularies of a run are fixed by its first start: a resumed run uses
// the checkpoint's, and an option given to change them is refused, as a model
// option is. What is certain comes from the checkpoint: the model type
// SentencePiece records, and the number of pieces (a tiny corpus yields fewer
// than asked, so more pieces than --vocab-size mean another size was asked;
// SentencePiece records the size it reached, not the one asked). The size asked
// for, and --shared-vocab off against one vocabulary for both sides (identical
// text on both sides gives that too), come from the run's config.toml, which
// each start writes with the run's values.
void Trainer::check_tokenizer_options(const LoadedModel& loaded) {
  const auto given = [&](const char* name) { return opt_.given.count(name) > 0; };
  const auto refuse = [&](const std::string& was, const std::string& now) {
    throw Error(located(resume_path_, 0, "was trained with " + was + " but the options say " + now +
                                             "; a resumed run keeps its vocabularies: drop that option (or set it as "
                                             "the run's config.toml has it) to resume, or train into a new --output"));
  };
  // A SentencePiece model given to resume with (config.toml records the first) is the run's own, or
  // refused; one that can no longer be read is no matter: the checkpoint holds the run's own.
  const auto same_model = [&](const char* option, const std::string& path, const Tokenizer& had, const char* side) {
    if (!given(option) || path.empty()) return;
    std::string bytes;
    try {
      bytes = Tokenizer::load(path).bytes();
    } catch (const Error& e) {
      if (is_main()) spdlog::warn("{} (--{}): resuming with the checkpoint's own {} SentencePiece model", e.what(),
                                  option, side);
      return;
    }
    if (bytes != had.bytes())
      refuse(std::string("another ") + side + " SentencePiece model (its own is in the checkpoint)",
             std::string("--") + option + " " + path);
  };
  same_model("src-spm", tok_opt_.src_model, loaded.src_tok, "source");
  if (!tok_opt_.shared) same_model("tgt-spm", tok_opt_.tgt_model, loaded.tgt_tok, "target");  // shared: the source's
  const int64_t pieces = std::max(loaded.src_tok.vocab_size(), loaded.tgt_tok.vocab_size());
  const bool trained = tok_opt_.src_model.empty();  // by nmt-train (not --src-spm): --vocab-size and --spm-type made them
  std::optional<TokenizerOptions> recorded;  // the run's config.toml, when it reads and fits the checkpoint
  try {
    TokenizerOptions t;
    ConfigFile::read(folder_.path("config.toml")).apply(t);
    if (!trained || t.vocab_size >= pieces) recorded = t;
  } catch (const Error&) {
  }
  const bool two = loaded.src_tok.bytes() != loaded.tgt_tok.bytes();
  if (given("shared-vocab") && tok_opt_.shared && two)
    refuse("--shared-vocab off (a vocabulary for each side)", "--shared-vocab");
  if (given("shared-vocab") && !tok_opt_.shared && !two && recorded && recorded->shared)
    refuse("--shared-vocab (one vocabulary for both sides)", "--shared-vocab=false");
  const std::string type = loaded.src_tok.model_type();
  if (trained && given("spm-type") && !type.empty() && type != tok_opt_.model_type)
    refuse("--spm-type " + type, "--spm-type " + tok_opt_.model_type);
  if (trained && given("vocab-size")) {
    if (pieces > tok_opt_.vocab_size)
      refuse("a vocabulary of " + counted(pieces, "piece") + " (its config.toml: --vocab-size " +
                 (recorded ? std::to_string(recorded->vocab_size) : std::string("unknown")) + ")",
             "--vocab-size " + std::to_string(tok_opt_.vocab_size));
    if (recorded && recorded->vocab_size != tok_opt_.vocab_size)
      refuse("--vocab-size " + std::to_string(recorded->vocab_size), "--vocab-size " + std::to_string(tok_opt_.vocab_size));
  }
  // config.toml goes on recording what made the vocabularies, not this start's defaults.
  if (!given("spm-type") && (type == "unigram" || type == "bpe")) tok_opt_.model_type = type;
  if (!given("vocab-size") && recorded) tok_opt_.vocab_size = recorded->vocab_size;
  if (!given("shared-vocab")) tok_opt_.shared = !two && (recorded ? recorded->shared : tok_opt_.shared);
}

// A resumed run goes on at the checkpoint's learning rate, as the schedule
// has left it (halved on plateaus, say). A --learning-rate other than the one
// the run's config.toml records (each start writes it) is a change the user
// asked for: it replaces the checkpoint's from this step on, and the schedule
// goes on from there. Rank 0 reads config.toml and decides; the other ranks
// take its rate. A config.toml that cannot be read leaves the checkpoint's
// rate, with a warning when the options give another one.
void Trainer::resume_learning_rate() {
  if (is_main() && opt_.given.count("learning-rate") > 0 && opt_.learning_rate != state_.learning_rate) {
    std::optional<double> recorded;
    try {
      TrainOptions t;
      ConfigFile::read(folder_.path("config.toml")).apply(t);
      recorded = t.learning_rate;
    } catch (const Error& e) {
      spdlog::warn("{}: resuming at the checkpoint's learning rate {}, not --learning-rate {}", e.what(),
                   shortest_decimal(state_.learning_rate), shortest_decimal(opt_.learning_rate));
    }
    if (recorded && *recorded != opt_.learning_rate) {
      spdlog::info("resuming at --learning-rate {} (the run was at {}, and started at {})",
                   shortest_decimal(opt_.learning_rate), shortest_decimal(state_.learning_rate),
                   shortest_decimal(*recorded));
      state_.learning_rate = opt_.learning_rate;
      state_.plateau = 0;
    }
  }
  if (!comm_) return;
  std::string rate = is_main() ? shortest_decimal(state_.learning_rate) : std::string();
  comm_->broadcast_bytes(&rate);
  state_.learning_rate = std::stod(rate);
}

void Trainer::init_smoothing() {
  auto stepped = std::move(state_.stepped_weights);  // from the checkpoint resumed; empty otherwise
  state_.stepped_weights.clear();
  if (stepped.empty() && opt_.exponential_smoothing <= 0) return;
  const auto params = distinct_parameters(*model_);
  std::vector<torch::Tensor> in_order;  // `stepped` in the order of `params`
  if (!stepped.empty()) {
    for (const auto& p : params) {
      for (const auto& named : model_->named_parameters()) {
        if (!named.value().is_same(p)) continue;
        const auto it = std::find_if(stepped.begin(), stepped.end(), [&](const auto& s) { return s.first == named.key(); });
        if (it == stepped.end())
          throw Error(located(resume_path_, 0, "training state weight '" + named.key() + "' is missing"));
        in_order.push_back(it->second.to(p.device()));
        break;
      }
    }
  }
  // Only rank 0 validates and saves: the other ranks step the weights alone.
  if (opt_.exponential_smoothing > 0 && is_main()) {
    smoothing_ = std::make_unique<WeightSmoothing>(params, opt_.exponential_smoothing);
    if (!in_order.empty()) smoothing_->restart_from(in_order);
    spdlog::info("exponential smoothing {}: validating and saving a moving average of the weights",
                 shortest_decimal(opt_.exponential_smoothing));
    if (stepped.empty() && !resume_path_.empty())
      spdlog::warn("--exponential-smoothing from step {}: the run's validations so far were of its weights, later "
                   "ones are of their average (best.ckpt and the schedule compare the two)", state_.step);
    return;
  }
  if (in_order.empty()) return;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) params[i].copy_(in_order[i]);
  if (is_main())
    spdlog::warn("resuming without --exponential-smoothing: from the weights training stepped, not the checkpoint's "
                 "moving average of them (best.ckpt and the schedule compare validations of the two)");
}

std::vector<std::pair<std::string, torch::Tensor>> Trainer::named_stepped_weights() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  const auto& params = smoothing_->parameters();
  const auto& stepped = smoothing_->stepped_weights();
  for (const auto& named : model_->named_parameters())
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].is_same(named.value())) out.emplace_back(named.key(), stepped[i]);
  return out;
}

}  // namespace nmt
