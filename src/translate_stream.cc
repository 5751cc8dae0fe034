// nmt-translate's streaming loop.
#include "translate_stream.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <iostream>

#include "checkpoint.h"
#include "corpus.h"
#include "device.h"
#include "error.h"
#include "metrics.h"

namespace nmt {

StreamSummary translate_stream(const StreamOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  set_threads(opt.threads);
  auto device = resolve_device(opt.device);
  auto loaded = load_checkpoint(opt.model_path, device);
  Translator tr(loaded);
  spdlog::info("loaded {} ({} attention) on {}", opt.model_path, to_string(loaded.options.attention),
               describe_device(device));

  std::ifstream fin;
  const bool from_stdin = opt.input.empty() || opt.input == "-";
  const std::string in_name = from_stdin ? "<stdin>" : opt.input;
  if (!from_stdin) {
    fin.open(opt.input, std::ios::binary);
    if (!fin) throw Error(located(opt.input, 0, "cannot open input"));
  }
  std::istream& in = from_stdin ? std::cin : fin;
  const bool to_stdout = opt.output.empty() || opt.output == "-";
  const std::string tmp = to_stdout ? "" : opt.output + ".tmp";
  std::ofstream fout;
  if (!to_stdout) {
    fout.open(tmp, std::ios::binary | std::ios::trunc);
    if (!fout) throw Error(located(opt.output, 0, "cannot open output for writing"));
  }
  std::ostream& out = to_stdout ? std::cout : fout;

  StreamSummary sum;
  std::vector<std::string> refs, outputs;
  if (!opt.reference.empty()) refs = read_lines(opt.reference);  // read first: fail before translating
  std::vector<std::string> window;
  std::string raw;
  int64_t line = 0;
  auto flush_window = [&] {
    auto hyps = tr.translate(window, opt.translate);
    for (const auto& h : hyps) {
      std::string text = tr.tgt_tokenizer().decode(h.front().ids);
      out << text << '\n';
      if (!opt.reference.empty()) outputs.push_back(std::move(text));
      sum.output_tokens += static_cast<int64_t>(h.front().ids.size());
    }
    out.flush();
    if (!out) throw Error(located(to_stdout ? "<stdout>" : opt.output, 0, "write failed (disk full?)"));
    sum.sentences += static_cast<int64_t>(window.size());
    window.clear();
  };
  while (std::getline(in, raw)) {
    window.push_back(checked_line(raw, in_name, ++line));
    if (static_cast<int64_t>(window.size()) >= opt.window) flush_window();
  }
  if (in.bad()) throw Error(located(in_name, line, "read error"));
  if (!window.empty()) flush_window();
  if (!to_stdout) {
    fout.close();
    if (!fout) throw Error(located(opt.output, 0, "write failed"));
    if (std::rename(tmp.c_str(), opt.output.c_str()) != 0) throw Error(located(opt.output, 0, "cannot replace"));
  }
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("translated {} sentences ({} tokens) in {:.2f}s: {:.1f} sentences/s", sum.sentences,
               sum.output_tokens, sum.seconds, sum.sentences / std::max(sum.seconds, 1e-9));
  if (!opt.reference.empty()) {
    if (refs.size() != outputs.size())
      throw Error(located(opt.reference, 0, std::to_string(refs.size()) + " reference lines for " +
                                                std::to_string(outputs.size()) + " input lines"));
    auto bleu = corpus_bleu(outputs, refs);
    sum.bleu = bleu.score;
    sum.chrf = corpus_chrf(outputs, refs).score;
    sum.exact_match = exact_match(outputs, refs);
    spdlog::info("{} | signature {}", bleu.to_string(), bleu.signature());
    spdlog::info("chrF2 = {:.2f} | exact match = {:.2f}%", sum.chrf, sum.exact_match);
  }
  return sum;
}

}  // namespace nmt
