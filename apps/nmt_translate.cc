// nmt-translate: translates text from stdin (or --input) to stdout (or
// --output), one line per line, in order; or scores given translations.
//   nmt-translate -m model/best.ckpt < in.txt > out.txt
//   nmt-translate -m model/best.ckpt -b 5 --n-best 5 < in.txt
//   nmt-translate -m model/best.ckpt --score < pairs.tsv
#include <CLI/CLI.hpp>

#include "app.h"
#include "translate_stream.h"

int main(int argc, char** argv) {
  nmt::StreamOptions opt;
  bool verbose = false;
  CLI::App app{"Translate text with an nmt checkpoint."};
  app.add_option("-m,--model", opt.model_paths, "Checkpoint (.ckpt) written by nmt-train; repeat for an ensemble")->required();
  app.add_option("-i,--input", opt.input, "Input file (default: stdin)");
  app.add_option("-o,--output", opt.output, "Output file (default: stdout)");
  app.add_option("-b,--beam-size", opt.translate.search.beam_size, "Beam size (1: greedy)")->capture_default_str();
  app.add_option("--batch-size", opt.translate.batch_sentences, "Sentences per batch")->capture_default_str();
  app.add_option("--batch-tokens", opt.translate.batch_tokens, "Source tokens per batch (0: no budget)")->capture_default_str();
  app.add_option("--length-penalty", opt.translate.search.length_penalty, "GNMT length penalty alpha")->capture_default_str();
  app.add_option("--max-length-ratio", opt.translate.search.max_length_ratio, "Output length cap: ratio * source + 5")->capture_default_str();
  app.add_option("--max-length", opt.translate.search.max_length, "Output length cap in pieces")->capture_default_str();
  app.add_option("--n-best", opt.translate.search.n_best, "Print the N best hypotheses as 'i ||| hyp ||| score' (N <= beam size)")->capture_default_str();
  app.add_flag("--scores", opt.scores, "Append ' ||| score' (length-normalized log-probability) to each line");
  app.add_flag("--replace-unk", opt.replace_unk, "Replace generated <unk> by the most attended source piece");
  app.add_flag("--score", opt.score_mode, "Score given translations: print log P(target | source) per pair (input: TSV, or --src/--tgt)");
  app.add_option("--src", opt.src, "Score mode: source file");
  app.add_option("--tgt", opt.tgt, "Score mode: target file");
  app.add_option("--reference", opt.reference,
                 "Score the output against this file: BLEU (cased, -lc, --tokenize none), chrF, exact match on stderr");
  app.add_option("--scores-json", opt.scores_json, "With --reference: also write the scores and signatures to this JSON file")
      ->needs("--reference");
  app.add_option("--max-input-length", opt.translate.max_input_length, "Crop longer inputs to this many pieces (0: never)")->capture_default_str();
  app.add_option("--window", opt.window, "Lines read and sorted together")->capture_default_str();
  app.add_option("--max-line-bytes", opt.max_line_bytes, "Crop longer input lines to this many bytes (score mode: an error)")->capture_default_str();
  app.add_option("--device", opt.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  app.add_option("--threads", opt.threads, "CPU threads (0: NMT_THREADS or all cores)")->capture_default_str();
  app.add_flag("-v,--verbose", verbose, "Debug logging");
  CLI11_PARSE(app, argc, argv);
  nmt::setup_logging(verbose);
  nmt::install_signal_handlers("nmt-translate");
  return nmt::run_guarded([&] {
    nmt::translate_stream(opt);
    return nmt::kExitOk;
  });
}
