// nmt-translate: translates text from stdin (or --input) to stdout (or
// --output), one line per line, in order; or scores given translations.
//   nmt-translate -m model/best.ckpt < in.txt > out.txt
//   nmt-translate -m model/best.ckpt -b 5 --n-best 5 < in.txt
//   nmt-translate -m model/best.ckpt --score-pairs < pairs.tsv
//   nmt-translate --evaluate --reference ref.txt < out.txt
#include "cli.h"
#include "entry_points.h"
#include "tools/app.h"
#include "tools/translate_stream.h"

int nmt::apps::translate_main(int argc, char** argv) {
  nmt::StreamOptions opt;
  CLI::App app{"Translate text with an nmt checkpoint."};
  nmt::cli::Tool tool(app, "nmt-translate");
  tool.binder().add(opt);
  app.footer(
      "Examples:\n"
      "  nmt-translate -m run/best.ckpt < in.txt > out.txt\n"
      "  nmt-translate -m a.ckpt -m b.ckpt -b 10 --reference ref.txt -i in.txt -o out.txt\n"
      "  nmt-translate -m run/best.ckpt --score-pairs --src in.txt --tgt out.txt\n"
      "  nmt-translate --evaluate --reference ref.txt --tokenize none -i out.txt");
  if (const int code = tool.parse(argc, argv, opt); code >= 0) return code;
  opt.given = tool.given();
  opt.typed = tool.typed();
  nmt::setup_logging(tool.verbose);
  nmt::install_signal_handlers("nmt-translate");
  return nmt::run_guarded([&] {
    nmt::translate_stream(opt);
    return nmt::kExitOk;
  });
}
