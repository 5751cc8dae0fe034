// Everything before the first training step: options, threads and
// device, the process group, the output folder, data, tokenizers, model,
// optimizer and (with --resume) the saved state.
#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "base/blas_kernels.h"
#include "base/config.h"
#include "base/error.h"
#include "base/format.h"
#include "io/io.h"
#include "model/device.h"
#include "train/batch_parts.h"
#include "train/flat_adam.h"
#include "train/graphed_step.h"
#include "train/trainer_impl.h"

namespace nmt {
namespace fs = std::filesystem;
namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainOptions& opt, const std::vector<torch::Tensor>& params) {
  if (opt.optimizer == OptimizerType::kSgd)
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(opt.learning_rate).weight_decay(opt.weight_decay));
  return std::make_unique<FlatAdam>(
      params, torch::optim::AdamOptions(opt.learning_rate)
                  .betas({opt.adam_beta1, opt.adam_beta2})
                  .weight_decay(opt.weight_decay));
}

}  // namespace

void Trainer::prepare() {
  validate_options();
  device_ = start_runtime(opt_.runtime, &threads_);
  if (opt_.bf16 && !device_.is_cpu())
    throw UsageError("--bf16 is for training on the CPU; on " + device_.str() + " leave it out");
  if (opt_.bf16 && !CpuFeatures::detect().avx512_bf16 && is_main())
    spdlog::warn("--bf16: this CPU has no bfloat16 units (AVX512-BF16, AMX): its products are emulated, slower than float");
  if (device_.is_cpu() && !opt_.fixed_threads && threads_ > 1) governor_ = std::make_unique<ThreadGovernor>(threads_);
  join_group();
  torch::manual_seed(static_cast<uint64_t>(opt_.seed));
  std::error_code ec;
  started_in_ = fs::current_path(ec).string();
  const bool resuming = claim_output();
  if (is_main())  // the first line of each start in train.log: which nmt, where, how
    spdlog::info("{} in {}: {}", nmt_build(), started_in_,
                 opt_.command_line.empty() ? std::string("started through the library") : opt_.command_line);
  auto t0 = Clock::now();
  auto train = read_corpus(opt_.train_src, opt_.train_tgt, opt_.train_tsv, "train");
  spdlog::info("training data: {}", train.stats.summary());
  spdlog::debug("read the training data in {:.2f}s", seconds_since(t0));
  require_usable(train, opt_.train_src, opt_.train_tgt, opt_.train_tsv);
  ParallelCorpus valid;
  if (!opt_.valid_tsv.empty() || !opt_.valid_src.empty() || !opt_.valid_tgt.empty()) {
    t0 = Clock::now();
    valid = read_corpus(opt_.valid_src, opt_.valid_tgt, opt_.valid_tsv, "valid");
    spdlog::info("validation data: {}", valid.stats.summary());
    spdlog::debug("read the validation data in {:.2f}s", seconds_since(t0));
  }
  t0 = Clock::now();
  init_model(resuming, train);
  spdlog::debug("{} the tokenizers and the model in {:.2f}s", resuming ? "loaded" : "made", seconds_since(t0));
  init_teachers();
  t0 = Clock::now();
  init_data(std::move(train), std::move(valid));
  spdlog::debug("encoded and batched the data in {:.2f}s", seconds_since(t0));
  init_optimizer(resuming);
  if (opt_.cuda_graphs) {
    GraphedStepOptions g;
    g.rows = 1;  // the largest batch's rows: every padded batch has them
    for (const auto& b : batches_) g.rows = std::max<int64_t>(g.rows, static_cast<int64_t>(b.size()));
    g.label_smoothing = opt_.label_smoothing;
    g.r_drop = opt_.r_drop;
    g.clip_norm = opt_.clip_norm;
    graphed_ = std::make_unique<GraphedTrainStep>(model_, dynamic_cast<FlatAdam&>(*optimizer_), g, device_);
  }
  // Whole batches where parts side by side would go wrong: the encoder GRU's
  // dropout between layers draws from the default generator, whose order
  // across threads would vary; and bfloat16 products come from oneDNN, whose
  // 2.6 (Debian 12's) failed when two threads created its kernels at once
  // (std::bad_array_new_length, "broken promise" in brgemm_kernel_create).
  const char* whole = model_opt_.enc_layers > 1 && model_opt_.dropout > 0 ? "with --enc-layers > 1 and dropout"
                      : opt_.bf16 && device_.is_cpu()                    ? "with --bf16"
                                                                         : nullptr;
  parts_wanted_ = whole ? 1 : opt_.batch_parts;
  if (whole && opt_.batch_parts > 1 && is_main())
    spdlog::warn("--batch-parts {} ignored: {} each batch trains whole", opt_.batch_parts, whole);
  if (!is_main()) {
    // Ranks differ in dropout masks only; the weights stay identical.
    torch::manual_seed(static_cast<uint64_t>(opt_.seed) + 1000003ULL * static_cast<uint64_t>(rank()));
    if (!resume_path_.empty()) fs::remove(resume_path_);
    return;  // no files, metrics or logs of their own
  }
  folder_.scan_step_checkpoints();
  folder_.open_metrics();
  // The effective options, which --config reads back (model: the checkpoint's
  // on resume), with absolute paths so that the folder stands on its own.
  TrainOptions written = opt_;
  TokenizerOptions written_tok = tok_opt_;
  make_paths_absolute(written);
  make_paths_absolute(written_tok);
  const std::string config = config_header() + ConfigWriter().add(written).add(written_tok).add(model_opt_).str();
  write_file_atomic(folder_.path("config.toml"), config);
  spdlog::debug("effective options, also in {}:\n{}", folder_.path("config.toml"), config);
  spdlog::info("model: {}, attention {}, device {}, {}, {} per epoch, {}{}",
               counted(count_parameters(*model_), "parameter"), to_string(model_opt_.attention),
               describe_device(device_), counted(threads_, "thread"),
               counted(static_cast<int64_t>(batches_.size()), "batch", "batches"),
               describe_batch_parts(parts_wanted_, threads_, device_), opt_.bf16 ? ", products in bfloat16" : "");
  if (graphed_) spdlog::info("--cuda-graphs: {}", graphed_->describe());
}

void Trainer::init_teachers() {
  if (opt_.kd_teachers.empty()) return;
  teachers_ = Teachers(opt_.kd_teachers, src_tok_, tgt_tok_, device_);
  if (is_main())
    spdlog::info("word-level distillation: {} (their ensemble's distribution), weight {}",
                 counted(static_cast<int64_t>(teachers_.size()), "teacher"), opt_.kd_weight);
}

// config.toml's opening comment: what the file is, how to resume from it,
// and who wrote it how. Each line of the command stays on its comment line
// (command_line() quotes newlines).
std::string Trainer::config_header() const {
  std::string h = "# The effective options of the nmt-train run in this folder, paths absolute: continue it\n"
                  "# from any folder with\n"
                  "#   nmt-train -c " + absolute_path(folder_.path("config.toml")) + " --resume\n"
                  "# Written by " + nmt_build() + " at the latest start of the run, in " + started_in_ + ", by\n";
  std::string command = opt_.command_line.empty() ? std::string("(the library, no command line)") : opt_.command_line;
  for (char& c : command)
    if (c == '\n' || c == '\r') c = ' ';
  return h + "#   " + command + "\n\n";
}

void Trainer::validate_options() {
  opt_.validate();
  tok_opt_.validate();
  ModelOptions arch = model_opt_;  // the vocabulary sizes come from the tokenizers later
  arch.src_vocab = arch.tgt_vocab = 1;
  arch.validate();
  if (model_opt_.tie_all_embeddings && !tok_opt_.shared && tok_opt_.src_model.empty())
    throw UsageError("--tie-all-embeddings needs one vocabulary for both sides: add --shared-vocab");
  if (model_opt_.alignment_head > 0 && opt_.guided_alignment.empty())
    throw UsageError("--alignment-head is trained only by guided alignment: give --guided-alignment (or drop it)");
  if (opt_.cuda_graphs) {
    const char* why = opt_.optimizer != OptimizerType::kAdam   ? "--optimizer adam"
                      : !opt_.guided_alignment.empty()         ? "no --guided-alignment"
                      : opt_.dist.world_size > 1               ? "one process (no --world-size)"
                      : opt_.bf16                              ? "no --bf16"
                                                               : nullptr;
    if (why) throw UsageError(std::string("--cuda-graphs needs ") + why);
  }
  if (opt_.r_drop > 0 && model_opt_.dropout == 0 && model_opt_.word_dropout == 0 &&
      model_opt_.dec_hidden_dropout == 0 && model_opt_.enc_hidden_dropout == 0 && opt_.dist.rank == 0)
    spdlog::warn("--r-drop {} without dropout: the two runs of each batch are the same, at twice the cost",
                 shortest_decimal(opt_.r_drop));
  if (const auto why = epoch_decay_unused(opt_); !why.empty() && opt_.dist.rank == 0) spdlog::warn("{}", why);
  if (opt_.dist.rank != 0) return;
  // Options a recipe's config file may carry to a run they do not apply to: named, not refused.
  if (const auto unused = opt_.unused_without_validation(); !unused.empty())
    spdlog::warn("{} act{} on validations, and no validation data was given (--valid-src and --valid-tgt, or "
                 "--valid-tsv): ignored (nothing validates, decays on a plateau or stops early, and best.ckpt is "
                 "the newest model)",
                 fmt::join(unused, ", "), unused.size() == 1 ? "s" : "");
  if (const auto unused = model_opt_.unused(); !unused.empty())
    spdlog::warn("{} sizes a layer that --attention {} does not have: ignored", fmt::join(unused, ", "),
                 to_string(model_opt_.attention));
}

void Trainer::join_group() {
  if (opt_.dist.world_size <= 1) return;
  comm_ = Communicator::join(opt_.dist);
  if (device_.is_cuda()) device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(opt_.dist.local_rank));
  spdlog::info("process group: {} (rendezvous {}:{}), this is rank {}", counted(comm_->world_size(), "rank"),
               opt_.dist.master_addr, opt_.dist.master_port, comm_->rank());
}

bool Trainer::claim_output() {
  bool resuming = is_main() && folder_.claim(opt_.output_dir, opt_.resume);
  if (comm_) {  // the other ranks follow rank 0's decision
    auto flag = torch::tensor({resuming ? 1L : 0L});
    comm_->broadcast({flag});
    resuming = flag.item<int64_t>() != 0;
  }
  return resuming;
}

void Trainer::init_model(bool resuming, const ParallelCorpus& train) {
  if (is_main() && resuming) {
    resume_path_ = folder_.resume_checkpoint();  // last.ckpt, or the newest checkpoint when it is missing
    auto loaded = load_checkpoint(resume_path_, device_);
    ModelOptions::fields(model_opt_, [&](const Field& field, const auto&) {
      if (opt_.given.count(field.name) == 0) return;
      const std::string f = underscored(field.name);  // as checkpoints store it
      if (model_opt_.field(f) != loaded.options.field(f))
        throw Error(located(resume_path_, 0, "was trained with " + f + "=" + loaded.options.field(f) +
                                                 " but the options say " + f + "=" + model_opt_.field(f) +
                                                 "; drop that option to resume, or train into a new --output"));
    });
    check_tokenizer_options(loaded);
    model_opt_ = loaded.options;
    if (model_opt_.alignment_head > 0 && opt_.guided_alignment.empty())
      throw Error(located(resume_path_, 0, "has an alignment head, which is trained only by guided alignment: "
                                           "give --guided-alignment to resume it"));
    src_tok_ = loaded.src_tok;
    tgt_tok_ = loaded.tgt_tok;
    model_ = loaded.model;
  } else if (is_main()) {
    make_tokenizers(train);
    write_file_atomic(folder_.path("src.spm.model"), src_tok_.bytes());
    write_file_atomic(folder_.path("tgt.spm.model"), tgt_tok_.bytes());
    model_opt_.src_vocab = src_tok_.vocab_size();
    model_opt_.tgt_vocab = tgt_tok_.vocab_size();
    if (model_opt_.tie_all_embeddings && src_tok_.bytes() != tgt_tok_.bytes())
      throw UsageError("--tie-all-embeddings needs one SentencePiece model for both sides, but --src-spm and "
                       "--tgt-spm differ");
    model_ = Seq2Seq(model_opt_);
    model_->to(device_);
  }
  if (comm_) share_from_main(resuming);
  spdlog::info("vocabularies: source {}, target {}", counted(src_tok_.vocab_size(), "piece"),
               counted(tgt_tok_.vocab_size(), "piece"));
}

void Trainer::make_tokenizers(const ParallelCorpus& train) {
  if (!tok_opt_.src_model.empty()) {
    src_tok_ = Tokenizer::load(tok_opt_.src_model);
    tgt_tok_ = tok_opt_.shared ? src_tok_
                               : Tokenizer::load(tok_opt_.tgt_model.empty() ? tok_opt_.src_model : tok_opt_.tgt_model);
  } else if (!tok_opt_.tgt_model.empty()) {
    throw UsageError("--tgt-spm given without --src-spm");
  } else if (tok_opt_.shared) {
    auto both = train.src;
    both.insert(both.end(), train.tgt.begin(), train.tgt.end());
    src_tok_ = tgt_tok_ = Tokenizer::train(both, tok_opt_);
    warn_small_vocabulary("shared", src_tok_, train.src.size() + train.tgt.size());
  } else {
    src_tok_ = Tokenizer::train(train.src, tok_opt_);
    tgt_tok_ = Tokenizer::train(train.tgt, tok_opt_);
    warn_small_vocabulary("source", src_tok_, train.src.size());
    warn_small_vocabulary("target", tgt_tok_, train.tgt.size());
  }
}

// --vocab-size is a soft limit (SentencePiece's hard_vocab_limit=false): text
// with fewer distinct pieces gives a smaller vocabulary, which is said once.
void Trainer::warn_small_vocabulary(const char* side, const Tokenizer& tok, size_t sentences) const {
  if (!is_main() || tok.vocab_size() >= tok_opt_.vocab_size) return;
  spdlog::warn("the {} vocabulary has {}, fewer than --vocab-size {}: its {} of training text hold no more "
               "distinct pieces (--vocab-size is an upper limit; more text gives more)",
               side, counted(tok.vocab_size(), "piece"), tok_opt_.vocab_size,
               counted(static_cast<int64_t>(sentences), "sentence"));
}

void Trainer::share_from_main(bool resuming) {
  const bool main = is_main();
  if (resuming) {
    // Every rank resumes from rank 0's file, which may not exist on its machine.
    std::string bytes;
    if (main) bytes = read_file_bounded(resume_path_, size_t{1} << 40, "checkpoint");
    comm_->broadcast_bytes(&bytes);
    if (!main) {
      resume_path_ = (fs::temp_directory_path() / ("nmt-resume-" + std::to_string(::getpid()) + ".ckpt")).string();
      write_file_atomic(resume_path_, bytes);
      auto loaded = load_checkpoint(resume_path_, device_);
      model_opt_ = loaded.options;
      src_tok_ = loaded.src_tok;
      tgt_tok_ = loaded.tgt_tok;
      model_ = loaded.model;
    }
    return;
  }
  std::string src = main ? src_tok_.bytes() : "", tgt = main ? tgt_tok_.bytes() : "";
  std::string config = main ? model_opt_.serialize() : "";
  comm_->broadcast_bytes(&src);
  comm_->broadcast_bytes(&tgt);
  comm_->broadcast_bytes(&config);
  if (!main) {
    src_tok_ = Tokenizer::from_bytes(src, "rank 0's source tokenizer");
    tgt_tok_ = Tokenizer::from_bytes(tgt, "rank 0's target tokenizer");
    model_opt_ = ModelOptions::parse(config, "rank 0's model config");
    model_ = Seq2Seq(model_opt_);
    model_->to(device_);
  }
  // Same seed, same initial weights; broadcasting makes it a guarantee.
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> tensors;
  for (const auto& p : model_->parameters()) tensors.push_back(p);
  for (const auto& b : model_->buffers()) tensors.push_back(b);
  comm_->broadcast(tensors);
}

void Trainer::init_data(ParallelCorpus train, ParallelCorpus valid) {
  std::vector<std::string> guide;
  if (!opt_.guided_alignment.empty()) {
    guide = read_lines(opt_.guided_alignment);
    if (static_cast<int64_t>(guide.size()) != train.stats.lines)
      throw Error(located(opt_.guided_alignment, 0, "has " + std::to_string(guide.size()) + " lines for " +
                                                        std::to_string(train.stats.lines) + " training pairs"));
  }
  auto encoded = encode_corpus(train, src_tok_, tgt_tok_, opt_.max_src_tokens, opt_.max_tgt_tokens,
                               guide.empty() ? nullptr : &guide, opt_.guided_alignment);
  train_ = std::move(encoded.examples);
  if (opt_.spm_alpha > 0) {  // keep the text: each epoch segments it anew
    for (int64_t i : encoded.kept) train_text_.emplace_back(std::move(train.src[i]), std::move(train.tgt[i]));
    sampler_ = {&src_tok_, &tgt_tok_, &train_text_, static_cast<int>(opt_.spm_nbest), opt_.spm_alpha,
                opt_.max_src_tokens, opt_.max_tgt_tokens};
    try {
      src_tok_.sample(train_text_[0].first, sampler_.nbest, opt_.spm_alpha, 0);
      tgt_tok_.sample(train_text_[0].second, sampler_.nbest, opt_.spm_alpha, 0);
    } catch (const Error& e) {
      throw Error(std::string("--spm-alpha needs unigram SentencePiece models (--spm-type unigram): ") + e.what());
    }
    spdlog::info("subword regularization: each epoch samples segmentations from the {} best, alpha {}",
                 opt_.spm_nbest, opt_.spm_alpha);
  }
  spdlog::info("training pairs: {} kept, {} over the length limits ({} / {}) skipped", train_.size(),
               encoded.skipped, opt_.max_src_tokens, counted(opt_.max_tgt_tokens, "piece"));
  if (train_.empty()) throw Error("no training pairs left after the length limits");
  // Validation keeps every pair: the scores must be over the whole set.
  valid_.examples = encode_corpus(valid, src_tok_, tgt_tok_, INT64_MAX, INT64_MAX).examples;
  if (opt_.valid_max_sentences > 0 && static_cast<int64_t>(valid.src.size()) > opt_.valid_max_sentences) {
    valid.src.resize(opt_.valid_max_sentences);
    valid.tgt.resize(opt_.valid_max_sentences);
  }
  valid_.source = std::move(valid.src);
  valid_.reference = std::move(valid.tgt);
}

void Trainer::init_optimizer(bool resuming) {
  optimizer_ = make_optimizer(opt_, model_->parameters());
  state_.learning_rate = opt_.learning_rate;
  state_.seed = opt_.seed;
  if (resuming) {
    state_ = load_train_state(resume_path_, *optimizer_, device_);
    resume_learning_rate();
    set_learning_rate(*optimizer_, state_.learning_rate);
    restore_rng();
  }
  batches_ = plan_batches(train_, plan_options(), static_cast<uint64_t>(state_.seed));
  const int64_t per_epoch = static_cast<int64_t>(batches_.size());
  if (resuming) {
    if (state_.batch_in_epoch > per_epoch)
      throw Error(located(resume_path_, 0, "training state field 'batch_in_epoch' is " +
                                               std::to_string(state_.batch_in_epoch) + ", past the " +
                                               std::to_string(per_epoch) + " batches of an epoch of this data "
                                               "(were the training data or batch options changed?)"));
    if (state_.seed != opt_.seed)
      spdlog::warn("resuming with the checkpoint's seed {} (not --seed {})", state_.seed, opt_.seed);
    spdlog::info("resumed from {} at step {}, epoch {}, batch {}", is_main() ? folder_.resume_checkpoint() : resume_path_,
                 state_.step, state_.epoch, state_.batch_in_epoch);
  }
  init_smoothing();
  total_steps_ = opt_.max_epochs * ((per_epoch + world() - 1) / world());
  if (opt_.max_steps > 0) total_steps_ = std::min(total_steps_, opt_.max_steps);
  elapsed0_ = state_.elapsed_seconds;
  saved_step_ = state_.step;
  t0_ = Clock::now();
}

}  // namespace nmt
