// The field lists of the three tools' top-level options structs (see
// fields.h), kept apart from options.h so that the structs stay readable.
// Included at the end of options.h; not meant to be included on its own.
#pragma once

namespace nmt {

template <class S, class V>
void TrainOptions::fields(S& s, V&& v) {
  const char* data = "Data";
  v(Field{"train-src", "Training source text, one sentence per line", data, nullptr, kPath}, s.train_src);
  v(Field{"train-tgt", "Training target text, aligned with --train-src", data, nullptr, kPath}, s.train_tgt);
  v(Field{"train-tsv", "Training pairs as source<TAB>target lines", data, nullptr, kPath}, s.train_tsv);
  v(Field{"valid-src", "Validation source text", data, nullptr, kPath}, s.valid_src);
  v(Field{"valid-tgt", "Validation target text", data, nullptr, kPath}, s.valid_tgt);
  v(Field{"valid-tsv", "Validation pairs as TSV", data, nullptr, kPath}, s.valid_tsv);
  v(Field{"output", "Folder for checkpoints, tokenizers and metrics", data, "-o", kPath}, s.output_dir);
  v(Field{"guided-alignment", "Word links (Pharaoh i-j, one line per training pair) that attention is trained towards",
          data, nullptr, kPath},
    s.guided_alignment);
  v(Field{"guided-alignment-weight", "Weight of the guided-alignment cross-entropy", data}, s.guided_alignment_weight);
  v(Field{"max-src-tokens", "Skip training pairs with a longer source (pieces)", data}, s.max_src_tokens);
  v(Field{"max-tgt-tokens", "Skip training pairs with a longer target (pieces)", data}, s.max_tgt_tokens);
  const char* tok = "Tokenizer";
  v(Field{"spm-alpha", "Subword regularization: sample each epoch's training segmentations with this alpha "
                       "(0: off; unigram only)", tok},
    s.spm_alpha);
  v(Field{"spm-nbest", "With --spm-alpha: sample among this many best segmentations", tok}, s.spm_nbest);

  const char* tr = "Training";
  v(Field{"batch-tokens", "Token budget per batch (padded, the longer side)", tr}, s.batch_tokens);
  v(Field{"max-batch-sentences", "Sentences per batch at most", tr}, s.max_batch_sentences);
  v(Field{"optimizer", "adam, or sgd (plain gradient descent)", tr}, s.optimizer);
  v(Field{"learning-rate", "Learning rate", tr}, s.learning_rate);
  v(Field{"adam-beta1", "Adam's beta1", tr}, s.adam_beta1);
  v(Field{"adam-beta2", "Adam's beta2", tr}, s.adam_beta2);
  v(Field{"weight-decay", "Weight decay (L2, both optimizers)", tr}, s.weight_decay);
  v(Field{"clip-norm", "Gradient-norm clipping (0: off)", tr}, s.clip_norm);
  v(Field{"label-smoothing", "Label smoothing", tr}, s.label_smoothing);
  v(Field{"lr-decay", "Learning-rate factor on a validation plateau", tr}, s.lr_decay);
  v(Field{"lr-patience", "Validations without improvement before decaying", tr}, s.lr_patience);
  v(Field{"lr-decay-start", "Also decay by --lr-decay at the end of this epoch and of every later one (0: off)", tr},
    s.lr_decay_start);
  v(Field{"min-lr", "Lowest learning rate", tr}, s.min_lr);
  v(Field{"max-epochs", "Epochs at most", tr}, s.max_epochs);
  v(Field{"max-steps", "Steps at most (0: no limit)", tr}, s.max_steps);
  v(Field{"max-minutes", "Wall-clock minutes at most (0: no limit)", tr}, s.max_minutes);
  v(Field{"early-stopping", "Stop after N validations without improvement (0: off)", tr}, s.early_stopping);
  v(Field{"max-bad-steps", "Stop after N batches in a row with a NaN/Inf loss or gradient", tr}, s.max_bad_steps);
  v(Field{"stop-metric", "Validation figure for best model and early stopping", tr}, s.stop_metric);
  v(Field{"seed", "Seed for weights, dropout and data order", tr}, s.seed);
  v(Field{"resume", "Continue the run in --output from last.ckpt (when it is missing, from the newest step-N.ckpt)", tr},
    s.resume);
  v(Field{"fixed-threads", "On the CPU, keep --threads even while other processes keep cores busy "
                           "(by default training then runs on the cores they leave free)", "Hardware"},
    s.fixed_threads);
  v(Field{"batch-parts", "On the CPU, train each batch as N parts side by side, one thread each, gradients summed "
                         "(0: one part per thread for batches large enough to gain from it, else whole; 1: always the whole batch over all threads)", "Hardware"},
    s.batch_parts);
  v(Field{"bf16", "On the CPU, matrix products in bfloat16 (weights, optimizer and loss stay float): faster with "
                 "AVX512-BF16 or AMX units, emulated and slower without", "Hardware"},
    s.bf16);

  const char* bk = "Logging and checkpoints";
  v(Field{"log-every", "Progress line every N steps", bk}, s.log_every);
  v(Field{"valid-every", "Validate and checkpoint every N steps and at each epoch end (0: epoch ends only)", bk},
    s.valid_every);
  v(Field{"keep-checkpoints", "step-N.ckpt files kept besides last/best", bk}, s.keep_checkpoints);
  v(Field{"average", "At the end, write average.ckpt: the mean of the newest N step-N.ckpt (0: off)", bk}, s.average);
  v(Field{"valid-max-sentences", "Translate at most N validation sentences (0: all)", bk}, s.valid_max_sentences);
  v(Field{"valid-batch-size", "Sentences per batch when translating the validation set", bk}, s.valid_batch_sentences);

  RuntimeOptions::fields(s.runtime, v);
  DistributedOptions::fields(s.dist, v);
}

template <class S, class V>
void StreamOptions::fields(S& s, V&& v) {
  const char* io = "Input and output";
  v(Field{"model", "Checkpoint (.ckpt) written by nmt-train; repeat for an ensemble", io, "-m", kMultiple},
    s.model_paths);
  v(Field{"info", "Print what each -m checkpoint holds (format, parameters, vocabularies, step, best validation "
                  "figure, model options) and exit", io},
    s.info);
  v(Field{"input", "Input file (default: stdin)", io, "-i"}, s.input);
  v(Field{"output", "Output file (default: stdout)", io, "-o"}, s.output);
  v(Field{"window", "Lines read and sorted together (fewer when the input pauses)", io}, s.window);
  v(Field{"max-line-bytes", "Crop longer input lines to this many bytes (score mode: an error)", io},
    s.max_line_bytes);
  v(Field{"with-scores", "Append ' ||| score' (length-normalized log-probability) to each translation", io,
          nullptr, 0, "scores"},
    s.scores);
  v(Field{"replace-unk", "Replace generated <unk> by the most attended source piece", io}, s.replace_unk);
  TranslateOptions::fields(s.translate, v);
  const char* sc = "Scoring";
  v(Field{"score-pairs", "Score given translations: print log P(target | source) per pair (input: TSV, or --src/--tgt)",
          sc, nullptr, 0, "score"},
    s.score_mode);
  v(Field{"evaluate", "Score the input, translations made elsewhere, against --reference (no model; as sacreBLEU)",
          sc},
    s.evaluate);
  v(Field{"src", "Score mode: source file", sc}, s.src);
  v(Field{"tgt", "Score mode: target file", sc}, s.tgt);
  v(Field{"reference", "Score the output against this file (repeat for several references): BLEU as "
                       "--tokenize/--lowercase say, and cased 13a, -lc and --tokenize none besides, chrF, exact "
                       "match; logged on stderr, and with --evaluate printed on the output", sc, nullptr, kMultiple},
    s.references);
  v(Field{"tokenize", "With --reference: BLEU's tokenizer, as sacreBLEU's --tokenize: 13a, intl, char or none", sc},
    s.bleu_tokenize);
  v(Field{"lowercase", "With --reference: BLEU lowercases both sides first (sacreBLEU -lc)", sc}, s.bleu_lowercase);
  v(Field{"scores-json", "With --reference: also write the scores and signatures to this JSON file", sc},
    s.scores_json);
  v(Field{"score-format", "--evaluate prints its scores as sacreBLEU does: text (its BLEU and chrF lines) or json "
                          "(the objects of sacrebleu -f json)", sc},
    s.score_format);
  RuntimeOptions::fields(s.runtime, v);
}

template <class S, class V>
void AlignRunOptions::fields(S& s, V&& v) {
  const char* in = "Input";
  v(Field{"model", "Checkpoint (.ckpt) written by nmt-train", in, "-m"}, s.model_path);
  v(Field{"aligner", "attention (the model's) or ibm2 (statistical, fast_align-style; needs no model, except for --format lex)", in},
    s.aligner);
  v(Field{"src", "Source sentences, one per line", in}, s.src);
  v(Field{"tgt", "Target sentences (forced mode); without it the model translates (free mode)", in}, s.tgt);
  v(Field{"tsv", "Pairs as source<TAB>target lines ('-': stdin)", in}, s.tsv);
  v(Field{"pairs", "Pairs as fast_align's 'source ||| target' lines ('-': stdin, read when no other input is given)",
          in},
    s.pairs);
  v(Field{"max-pairs", "Align at most N pairs (0: all)", in, "-n"}, s.max_pairs);
  v(Field{"max-input-length", "Crop each side of a pair to this many pieces, after its last whole word that fits "
                              "(0: never); the attention aligner only", in},
    s.max_input_length);
  v(Field{"beam-size", "Free mode: beam size (1: greedy)", in, "-b"}, s.search.beam_size);
  v(Field{"reverse-model", "Target->source checkpoint whose links are combined with --symmetrize (forced mode)", in},
    s.reverse_model);
  v(Field{"ibm-train-src", "ibm2: more source sentences to learn from (not aligned)", in}, s.ibm_train_src);
  v(Field{"ibm-train-tgt", "ibm2: their target sentences", in}, s.ibm_train_tgt);
  WordAlignerOptions::fields(s.ibm, v);
  const char* out = "Output";
  v(Field{"output", "Output file (default: stdout)", out, "-o"}, s.output);
  v(Field{"format",
          "csv (a matrix block per pair), tidy (one CSV table, a row per cell: pair,tgt_index,tgt_token,src_index,"
          "src_token,weight), pharaoh (word links i-j; free mode: translation ||| links), svg (heatmaps) or lex "
          "(ibm2: the lexical table over --model's pieces, for nmt-translate --shortlist); default csv, pharaoh "
          "for ibm2",
          out, "-f"},
    s.format);
  v(Field{"lex-best", "--format lex: the N most probable translations of each source piece", out}, s.lex_best);
  v(Field{"level", "Matrices over subword pieces or words (pieces merged: sum over source, mean over target)", out},
    s.level);
  v(Field{"output-dir", "Write one NNNN.csv (or NNNN.svg) per pair into this folder", out}, s.output_dir);
  v(Field{"heatmap", "Also write an NNNN.svg heatmap per pair into this folder", out}, s.heatmap_dir);
  const char* links = "Links";
  v(Field{"method", "Hard links: argmax (most attended source word per target word) or threshold", links}, s.method);
  v(Field{"threshold", "Weight at or above which a word pair links (--method threshold)", links}, s.threshold);
  v(Field{"shift", "Target token t takes the attention row of step t+N (the model reads y_t two steps later)", links},
    s.shift);
  v(Field{"symmetrize", "Combine with --reverse-model: intersection, union, grow-diag, grow-diag-final, "
                        "grow-diag-final-and, or average (mean of both matrices)", links},
    s.symmetrize);
  v(Field{"eval-gold", "Gold links (i-j sure, i?j possible): print precision, recall, AER", links}, s.eval_gold);
  v(Field{"gold-one-based", "Gold indices start at 1 (NAACL 2003 .talp files)", links}, s.gold_one_based);
  RuntimeOptions::fields(s.runtime, v);
}

}  // namespace nmt
