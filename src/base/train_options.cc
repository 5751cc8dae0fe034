// The checks of nmt-train's options (train_options.h).
#include "base/train_options.h"

#include <utility>

#include "base/validate.h"
#include "base/error.h"

namespace nmt {

namespace {

// The `noun` data ("training", "validation") comes as --WHAT-src with
// --WHAT-tgt, or as --WHAT-tsv: throws nmt::UsageError naming the option
// that is missing (when the data is `required`, or half given) or the two
// that exclude each other.
void require_pair_files(const std::string& what, const char* noun, const std::string& src, const std::string& tgt,
                        const std::string& tsv, bool required) {
  const std::string o = "--" + what;
  if (!tsv.empty()) {
    if (!src.empty() || !tgt.empty())
      throw UsageError(o + "-tsv excludes " + o + "-src and " + o + "-tgt: give the " + noun +
                       " data as two files or as one TSV");
    return;
  }
  if (src.empty() && tgt.empty()) {
    if (required)
      throw UsageError("option " + o + "-src is required (with " + o + "-tgt), or give " + o + "-tsv: the " + noun +
                       " data");
    return;
  }
  if (src.empty()) throw UsageError("option " + o + "-src is required with " + o + "-tgt");
  if (tgt.empty()) throw UsageError("option " + o + "-tgt is required with " + o + "-src");
}

}  // namespace

void TokenizerOptions::validate() const {
  if (model_type != "unigram" && model_type != "bpe")
    throw UsageError("--spm-type must be unigram or bpe, got '" + excerpt(model_type) + "'");
  check::in_range("--vocab-size", vocab_size, 8, 1 << 22);
  check::in_range("--character-coverage", character_coverage, 0.0, 1.0, check::End::kOpen);
  check::in_range("--spm-sentences", input_sentence_size, 1);
  if (!tgt_model.empty() && src_model.empty())
    throw UsageError("--tgt-spm needs --src-spm too (or give neither and the tokenizers are trained)");
}

void DistributedOptions::validate() const {
  check::in_range("--world-size", world_size, 1, 1 << 16);
  if (rank < 0 || rank >= world_size)
    throw UsageError("rank " + std::to_string(rank) + " is outside 0.." + std::to_string(world_size - 1) +
                " (--rank must be below --world-size " + std::to_string(world_size) + ")");
  check::in_range("--local-rank", local_rank, 0, 1 << 16);
  check::in_range("--master-port", master_port, 1, 65535);
  check::in_range("--dist-timeout", timeout_minutes, 0.0, 7 * 24 * 60.0, check::End::kOpen);
  check::in_range("--bucket-mb", bucket_mb, 1, 1 << 14);
}

void ReleaseOptions::validate() const {
  for (const auto& [name, p] : {std::pair<const char*, const std::vector<std::string>&>{"--release", paths},
                                {"--convert", convert}})
    if (!p.empty() && (p.size() != 2 || p[0].empty() || p[1].empty()))
      throw UsageError(std::string(name) + " takes two paths: the checkpoint to read and the one to write (" + name +
                       " IN.ckpt OUT.ckpt)");
  if (!paths.empty() && !convert.empty()) throw UsageError("--release and --convert exclude each other: one at a time");
}

void TrainOptions::validate() const {
  using check::End;
  using check::in_range;
  using check::kNoLimit;
  in_range("--max-src-tokens", max_src_tokens, 1);
  in_range("--max-tgt-tokens", max_tgt_tokens, 1);
  in_range("--guided-alignment-weight", guided_alignment_weight, 0.0, kNoLimit);
  in_range("--spm-alpha", spm_alpha, 0.0, 100.0);
  in_range("--spm-nbest", spm_nbest, 2, 1000);
  if (spm_alpha > 0 && !guided_alignment.empty())
    throw UsageError("--spm-alpha cannot be combined with --guided-alignment (its links are per piece of one segmentation)");
  in_range("--batch-tokens", batch_tokens, 1);
  in_range("--max-batch-sentences", max_batch_sentences, 1);
  in_range("--batch-parts", batch_parts, 0, kMaxThreads);
  in_range("--learning-rate", learning_rate, 0.0, kNoLimit, End::kOpen);
  in_range("--adam-beta1", adam_beta1, 0.0, 1.0, End::kClosed, End::kOpen);
  in_range("--adam-beta2", adam_beta2, 0.0, 1.0, End::kClosed, End::kOpen);
  in_range("--weight-decay", weight_decay, 0.0, kNoLimit);
  in_range("--clip-norm", clip_norm, 0.0, kNoLimit);
  in_range("--label-smoothing", label_smoothing, 0.0, 1.0, End::kClosed, End::kOpen);
  in_range("--lr-decay", lr_decay, 0.0, 1.0, End::kOpen);
  in_range("--lr-patience", lr_patience, 1);
  in_range("--lr-decay-start", lr_decay_start, 0);
  in_range("--min-lr", min_lr, 0.0, kNoLimit);
  in_range("--max-epochs", max_epochs, 1);
  in_range("--max-steps", max_steps, 0);
  in_range("--max-minutes", max_minutes, 0.0, kNoLimit);
  in_range("--early-stopping", early_stopping, 0);
  in_range("--max-bad-steps", max_bad_steps, 1);
  in_range("--seed", seed, 0);
  in_range("--log-every", log_every, 0);
  in_range("--valid-every", valid_every, 0);
  in_range("--keep-checkpoints", keep_checkpoints, 0);
  in_range("--average", average, 0, 1000);
  if (average > keep_checkpoints)
    throw UsageError("--average " + std::to_string(average) + " needs --keep-checkpoints of at least " +
                std::to_string(average) + " (it is " + std::to_string(keep_checkpoints) + ")");
  in_range("--valid-max-sentences", valid_max_sentences, 0);
  in_range("--valid-batch-size", valid_batch_sentences, 1);
  runtime.validate();
  if (output_dir.empty()) throw UsageError("--output must name a folder");
  dist.validate();
  require_pair_files("train", "training", train_src, train_tgt, train_tsv, /*required=*/true);
  require_pair_files("valid", "validation", valid_src, valid_tgt, valid_tsv, /*required=*/false);
}

}  // namespace nmt
