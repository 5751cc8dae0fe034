// nmt-train: trains an attention model on a parallel corpus.
//   nmt-train --train-src train.en --train-tgt train.de --valid-src ... -o model/
//   nmt-train --config configs/demo.toml
#include <CLI/CLI.hpp>

#include <atomic>
#include <cstdio>

#include "app.h"
#include "distributed.h"
#include "error.h"
#include "trainer.h"

namespace {
std::atomic<bool> g_stop{false};  // set by the first SIGINT/SIGTERM: save and stop
}  // namespace

int main(int argc, char** argv) {
  nmt::TrainOptions opt;
  nmt::TokenizerOptions tok;
  nmt::ModelOptions model;
  std::string attention = nmt::to_string(model.attention);
  std::string decoder = nmt::to_string(model.decoder);
  std::string stop_metric = nmt::to_string(opt.stop_metric);
  std::string optimizer = nmt::to_string(opt.optimizer);
  bool verbose = false;

  CLI::App app{"Train an RNN attention translation model (Bahdanau et al. 2015)."};
  app.set_config("--config", "", "TOML file of options (keys are the long option names)");
  app.allow_config_extras(CLI::config_extras_mode::error);  // a misspelt key is an error, not ignored
  app.get_formatter()->column_width(34);

  auto* data = "Data";
  app.add_option("--train-src", opt.train_src, "Training source text, one sentence per line")->group(data);
  app.add_option("--train-tgt", opt.train_tgt, "Training target text, aligned with --train-src")->group(data);
  app.add_option("--train-tsv", opt.train_tsv, "Training pairs as source<TAB>target lines")->group(data);
  app.add_option("--valid-src", opt.valid_src, "Validation source text")->group(data);
  app.add_option("--valid-tgt", opt.valid_tgt, "Validation target text")->group(data);
  app.add_option("--valid-tsv", opt.valid_tsv, "Validation pairs as TSV")->group(data);
  app.add_option("-o,--output", opt.output_dir, "Folder for checkpoints, tokenizers and metrics")->capture_default_str()->group(data);
  app.add_option("--guided-alignment", opt.guided_alignment, "Word links (Pharaoh i-j, one line per training pair) that attention is trained towards")->group(data);
  app.add_option("--guided-alignment-weight", opt.guided_alignment_weight, "Weight of the guided-alignment cross-entropy")->capture_default_str()->group(data);
  app.add_option("--max-src-tokens", opt.max_src_tokens, "Skip training pairs with a longer source (pieces)")->capture_default_str()->group(data);
  app.add_option("--max-tgt-tokens", opt.max_tgt_tokens, "Skip training pairs with a longer target (pieces)")->capture_default_str()->group(data);

  auto* tk = "Tokenizer";
  app.add_option("--spm-type", tok.model_type, "SentencePiece model type")->check(CLI::IsMember({"unigram", "bpe"}))->capture_default_str()->group(tk);
  app.add_option("--vocab-size", tok.vocab_size, "Pieces per vocabulary")->capture_default_str()->group(tk);
  app.add_option("--character-coverage", tok.character_coverage, "Share of characters the vocabulary covers")->capture_default_str()->group(tk);
  app.add_flag("--shared-vocab", tok.shared, "One vocabulary for source and target")->group(tk);
  app.add_option("--spm-sentences", tok.input_sentence_size, "Sentences sampled to train SentencePiece")->capture_default_str()->group(tk);
  app.add_option("--spm-alpha", opt.spm_alpha,
                 "Subword regularization: sample each epoch's training segmentations with this alpha (0: off; unigram only)")
      ->capture_default_str()->group(tk);
  app.add_option("--spm-nbest", opt.spm_nbest, "With --spm-alpha: sample among this many best segmentations")
      ->capture_default_str()->group(tk);
  app.add_option("--src-spm", tok.src_model, "Use this SentencePiece .model for the source instead of training one")->group(tk);
  app.add_option("--tgt-spm", tok.tgt_model, "Use this SentencePiece .model for the target")->group(tk);

  auto* md = "Model";
  app.add_option("--emb-dim", model.emb_dim, "Embedding size")->capture_default_str()->group(md);
  app.add_option("--enc-hidden", model.enc_hidden, "Encoder GRU size per direction")->capture_default_str()->group(md);
  app.add_option("--enc-layers", model.enc_layers, "Bidirectional encoder layers")->capture_default_str()->group(md);
  app.add_option("--dec-hidden", model.dec_hidden, "Decoder GRU size")->capture_default_str()->group(md);
  app.add_option("--attn-dim", model.attn_dim, "Additive attention size")->capture_default_str()->group(md);
  app.add_option("--attention", attention, "Score function")->check(CLI::IsMember({"additive", "dot", "general", "concat", "none"}))->capture_default_str()->group(md);
  app.add_option("--decoder", decoder, "Recurrence: bahdanau, or cgru (conditional GRU, as Nematus)")->check(CLI::IsMember({"bahdanau", "cgru"}))->capture_default_str()->group(md);
  app.add_option("--dropout", model.dropout, "Dropout probability")->capture_default_str()->group(md);
  app.add_flag("--tie-embeddings", model.tie_embeddings, "Tie target embeddings and output projection")->group(md);

  auto* tr = "Training";
  app.add_option("--batch-tokens", opt.batch_tokens, "Token budget per batch (padded)")->capture_default_str()->group(tr);
  app.add_option("--max-batch-sentences", opt.max_batch_sentences, "Sentences per batch at most")->capture_default_str()->group(tr);
  app.add_option("--optimizer", optimizer, "adam, or sgd (plain gradient descent)")->check(CLI::IsMember({"adam", "sgd"}))->capture_default_str()->group(tr);
  app.add_option("--learning-rate", opt.learning_rate, "Learning rate")->capture_default_str()->group(tr);
  app.add_option("--weight-decay", opt.weight_decay, "Weight decay (L2, both optimizers)")->capture_default_str()->group(tr);
  app.add_option("--clip-norm", opt.clip_norm, "Gradient-norm clipping (0: off)")->capture_default_str()->group(tr);
  app.add_option("--label-smoothing", opt.label_smoothing, "Label smoothing")->capture_default_str()->group(tr);
  app.add_option("--lr-decay", opt.lr_decay, "Learning-rate factor on a validation plateau")->capture_default_str()->group(tr);
  app.add_option("--lr-patience", opt.lr_patience, "Validations without improvement before decaying")->capture_default_str()->group(tr);
  app.add_option("--min-lr", opt.min_lr, "Lowest learning rate")->capture_default_str()->group(tr);
  app.add_option("--max-epochs", opt.max_epochs, "Epochs at most")->capture_default_str()->group(tr);
  app.add_option("--max-steps", opt.max_steps, "Steps at most (0: no limit)")->capture_default_str()->group(tr);
  app.add_option("--max-minutes", opt.max_minutes, "Wall-clock minutes at most (0: no limit)")->capture_default_str()->group(tr);
  app.add_option("--early-stopping", opt.early_stopping, "Stop after N validations without improvement (0: off)")->capture_default_str()->group(tr);
  app.add_option("--max-bad-steps", opt.max_bad_steps, "Stop after N batches in a row with a NaN/Inf loss or gradient")->capture_default_str()->group(tr);
  app.add_option("--stop-metric", stop_metric, "Validation figure for best model and early stopping")->check(CLI::IsMember({"loss", "perplexity", "bleu", "chrf"}))->capture_default_str()->group(tr);
  app.add_option("--seed", opt.seed, "Seed for weights, dropout and data order")->capture_default_str()->group(tr);
  app.add_flag("--resume", opt.resume, "Continue the run in --output from last.ckpt")->group(tr);

  auto* bk = "Logging and checkpoints";
  app.add_option("--log-every", opt.log_every, "Progress line every N steps")->capture_default_str()->group(bk);
  app.add_option("--valid-every", opt.valid_every, "Validate and checkpoint every N steps")->capture_default_str()->group(bk);
  app.add_option("--keep-checkpoints", opt.keep_checkpoints, "step-N.ckpt files kept")->capture_default_str()->group(bk);
  app.add_option("--average", opt.average, "At the end, write average.ckpt: the mean of the newest N step-N.ckpt (0: off)")->capture_default_str()->group(bk);
  app.add_option("--valid-max-sentences", opt.valid_max_sentences, "Translate at most N validation sentences (0: all)")->capture_default_str()->group(bk);
  app.add_flag("-v,--verbose", verbose, "Debug logging")->group(bk);

  auto* hw = "Hardware";
  app.add_option("--device", opt.device, "cpu, cuda, cuda:N or auto")->capture_default_str()->group(hw);
  app.add_option("--threads", opt.threads, "CPU threads (0: NMT_THREADS or all cores)")->capture_default_str()->group(hw);

  // Distributed: torchrun's environment variables give the defaults.
  auto* ds = "Distributed (data-parallel; scripts/train-distributed.sh)";
  try {
    opt.dist = nmt::distributed_from_env(opt.dist);
  } catch (const nmt::Error& e) {
    std::fprintf(stderr, "nmt-train: %s\n", e.what());
    return nmt::kExitError;
  }
  app.add_option("--rank", opt.dist.rank, "This process's rank (RANK)")->capture_default_str()->group(ds);
  app.add_option("--world-size", opt.dist.world_size, "Number of processes (WORLD_SIZE); 1: not distributed")->capture_default_str()->group(ds);
  app.add_option("--local-rank", opt.dist.local_rank, "Rank on this machine: uses cuda:N (LOCAL_RANK)")->capture_default_str()->group(ds);
  app.add_option("--master-addr", opt.dist.master_addr, "Host of rank 0 (MASTER_ADDR)")->capture_default_str()->group(ds);
  app.add_option("--master-port", opt.dist.master_port, "Rendezvous port on rank 0's host (MASTER_PORT)")->capture_default_str()->group(ds);
  app.add_option("--dist-timeout", opt.dist.timeout_minutes, "Minutes a rank waits for the others")->capture_default_str()->group(ds);

  CLI11_PARSE(app, argc, argv);
  nmt::setup_logging(verbose);
  return nmt::run_guarded([&] {
    model.attention = nmt::parse_attention(attention);
    model.decoder = nmt::parse_decoder(decoder);
    // Model options given on the command line or in the config must agree with a resumed checkpoint.
    const std::pair<const char*, const char*> model_flags[] = {
        {"--emb-dim", "emb_dim"}, {"--enc-hidden", "enc_hidden"}, {"--enc-layers", "enc_layers"},
        {"--dec-hidden", "dec_hidden"}, {"--attn-dim", "attn_dim"}, {"--attention", "attention"}, {"--decoder", "decoder"},
        {"--dropout", "dropout"}, {"--tie-embeddings", "tie_embeddings"}};
    for (const auto& [flag, field] : model_flags)
      if (app.count(flag) > 0) opt.explicit_model_fields.push_back(field);
    opt.stop_metric = nmt::parse_stop_metric(stop_metric);
    opt.optimizer = nmt::parse_optimizer(optimizer);
    nmt::install_signal_handlers("nmt-train", &g_stop);  // a second signal leaves at once
    nmt::train(opt, tok, model, &g_stop);  // an interrupted run has saved last.ckpt: still a success
    return nmt::kExitOk;
  });
}
