// nmt-translate: translates text from stdin (or --input) to stdout (or
// --output), one line per line, in order; or scores given translations.
//   nmt-translate -m model/best.ckpt < in.txt > out.txt
//   nmt-translate -m model/best.ckpt -b 5 --n-best 5 < in.txt
//   nmt-translate -m model/best.ckpt --score < pairs.tsv
#include "cli.h"
#include "tools/app.h"
#include "tools/translate_stream.h"

int main(int argc, char** argv) {
  nmt::StreamOptions opt;
  CLI::App app{"Translate text with an nmt checkpoint."};
  nmt::cli::Tool tool(app, "nmt-translate");
  tool.binder().add(opt);
  if (const int code = tool.parse(argc, argv, opt); code >= 0) return code;
  nmt::setup_logging(tool.verbose);
  nmt::install_signal_handlers("nmt-translate");
  return nmt::run_guarded([&] {
    nmt::translate_stream(opt);
    return nmt::kExitOk;
  });
}
