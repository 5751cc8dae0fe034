// nmt-serve: translation and attention over HTTP/JSON, with a page that
// shows the attention as a heatmap.
//   nmt-serve -m model/best.ckpt                       (http://127.0.0.1:8080/)
//   curl -s localhost:8080/translate -d '{"text": ["a sentence ."], "alignment": "hard"}'
#include <atomic>

#include "cli.h"
#include "entry_points.h"
#include "serve/server.h"
#include "tools/app.h"

namespace {
std::atomic<bool> g_stop{false};  // set by the first SIGTERM/SIGINT: answer what is in hand and leave
}  // namespace

int nmt::apps::serve_main(int argc, char** argv) {
  nmt::ServeOptions opt;
  CLI::App app{"Serve an nmt checkpoint over HTTP: POST /translate (JSON), GET /health, GET /models, GET / (a page)."};
  app.get_formatter()->column_width(34);
  nmt::cli::Tool tool(app, "nmt-serve");
  tool.binder().add(opt);
  app.footer(
      "Examples:\n"
      "  nmt-serve -m run/best.ckpt\n"
      "  nmt-serve -m a.ckpt -m b.ckpt --port 9000 -b 5\n"
      "  nmt-serve -c runs/multi30k-en-de-tok/system.toml   (a system: weights, rescoring, MBR)\n"
      "  curl -s localhost:8080/translate -d '{\"text\": [\"a sentence .\"], \"alignment\": \"soft\"}'");
  if (const int code = tool.parse(argc, argv, opt); code >= 0) return code;
  opt.given = tool.given();
  nmt::install_signal_handlers("nmt-serve", &g_stop);  // a second signal leaves at once; before the first log line
  nmt::setup_logging(tool.verbose);
  return nmt::run_guarded([&] {
    nmt::serve(opt, g_stop);
    return nmt::kExitOk;
  });
}
