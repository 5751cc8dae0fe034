// nmt-align: attention matrices of a model as CSV, one block per sentence
// pair (forced: the model reads the given target; free: it translates).
//   nmt-align -m model/best.ckpt --src a.en --tgt a.de > attention.csv
#include <CLI/CLI.hpp>

#include "align.h"
#include "app.h"

int main(int argc, char** argv) {
  nmt::AlignRunOptions opt;
  bool verbose = false;
  CLI::App app{"Dump attention matrices of an nmt model as CSV."};
  app.add_option("-m,--model", opt.model_path, "Checkpoint (.ckpt) written by nmt-train")->required();
  app.add_option("--src", opt.src, "Source sentences, one per line");
  app.add_option("--tgt", opt.tgt, "Target sentences (forced mode); without it the model translates (free mode)");
  app.add_option("--tsv", opt.tsv, "Pairs as source<TAB>target lines ('-': stdin)");
  app.add_option("-o,--output", opt.output, "Output file (default: stdout)");
  app.add_option("-n,--max-pairs", opt.max_pairs, "Align at most N pairs (0: all)")->capture_default_str();
  app.add_option("--device", opt.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  app.add_option("--threads", opt.threads, "CPU threads (0: NMT_THREADS or all cores)")->capture_default_str();
  app.add_flag("-v,--verbose", verbose, "Debug logging");
  CLI11_PARSE(app, argc, argv);
  nmt::setup_logging(verbose);
  return nmt::run_guarded([&] {
    nmt::run_alignment(opt);
    return nmt::kExitOk;
  });
}
