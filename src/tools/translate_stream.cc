// nmt-translate's streaming loop and output formats.
#include "tools/translate_stream.h"

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "base/error.h"
#include "base/json.h"
#include "base/validate.h"
#include "io/io.h"
#include "model/checkpoint.h"
#include "model/device.h"
#include "text/corpus.h"
#include "text/metrics.h"

namespace nmt {
namespace {

// Scores `outputs` against `refs`: BLEU as opt.bleu_tokenize and
// opt.bleu_lowercase say, and besides it the ways papers report BLEU
// (sacreBLEU's -lc, and --tokenize none, i.e. multi-bleu on tokenized text),
// plus chrF2 and exact match; logs each with its signature, fills `sum` and,
// when opt.scores_json is set, writes the same as one JSON object there
// (atomically). Throws nmt::Error if that file cannot be written.
void write_scores(const std::vector<std::string>& outputs, const std::vector<std::string>& refs,
                  const StreamOptions& opt, StreamSummary* sum) {
  const BleuOptions chosen{opt.bleu_lowercase, to_string(opt.bleu_tokenize)};
  const BleuScore bleu = corpus_bleu(outputs, refs, chosen);
  const BleuScore bleu_lc = corpus_bleu(outputs, refs, BleuOptions{true, "13a"});
  const BleuScore bleu_none = corpus_bleu(outputs, refs, BleuOptions{false, "none"});
  const ChrfScore chrf = corpus_chrf(outputs, refs);
  sum->bleu = bleu.score;
  sum->bleu_lc = bleu_lc.score;
  sum->bleu_none = bleu_none.score;
  sum->chrf = chrf.score;
  sum->exact_match = exact_match(outputs, refs);
  spdlog::info("{} | {}", bleu.to_string(), bleu.signature());
  for (const BleuScore* b : {&bleu_lc, &bleu_none})  // the paper figures, unless that was the chosen one
    if (b->signature() != bleu.signature()) spdlog::info("{} | {}", b->to_string(), b->signature());
  spdlog::info("{} | {}", chrf.to_string(), chrf.signature());
  spdlog::info("exact match = {:.2f}%", sum->exact_match);
  if (opt.scores_json.empty()) return;
  JsonObject json;
  json.add("sentences", static_cast<int64_t>(outputs.size()));
  const std::pair<const char*, const BleuScore*> bleus[] = {{"bleu", &bleu}, {"bleu_lc", &bleu_lc}, {"bleu_none", &bleu_none}};
  for (const auto& [name, b] : bleus)
    json.add(name, b->score, 10)
        .add(std::string(name) + "_signature", b->signature())
        .add(std::string(name) + "_detail", b->to_string());
  json.add("chrf", chrf.score, 10).add("chrf_signature", chrf.signature()).add("exact_match", sum->exact_match, 10);
  write_file_atomic(opt.scores_json, json.str() + "\n");
}

std::string format_score(double s) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(4) << s;
  return o.str();
}

// Reads the next line of `in` into *line; false at the end. Throws nmt::Error
// naming the file and line when the line is longer than max_bytes
// (--max-line-bytes), where modes that read given text do not crop.
bool next_whole_line(LineReader& in, std::string* line, int64_t max_bytes) {
  bool too_long = false;
  if (!in.next(line, &too_long)) return false;
  if (too_long)
    throw Error(located(in.name(), in.line(), "line is longer than " + std::to_string(max_bytes) +
                                                  " bytes (--max-line-bytes)"));
  return true;
}

StreamSummary score_pairs(const StreamOptions& opt, Translator& tr, OutputFile& out) {
  StreamSummary sum;
  std::vector<std::string> src, tgt;
  auto flush = [&] {
    for (double s : tr.score(src, tgt, opt.translate.batch_sentences)) out.stream() << format_score(s) << '\n';
    out.flush();
    sum.sentences += static_cast<int64_t>(src.size());
    src.clear();
    tgt.clear();
  };
  if (!opt.src.empty() || !opt.tgt.empty()) {
    if (opt.src.empty() || opt.tgt.empty()) throw Error("--score-pairs needs both --src and --tgt (or a TSV input)");
    auto c = read_parallel(opt.src, opt.tgt, CorpusLimits{static_cast<size_t>(opt.max_line_bytes), false});
    if (c.stats.empty > 0)
      throw Error(c.stats.first_empty + ": empty line; --score-pairs with two files needs no empty lines (use a TSV input)");
    src = std::move(c.src);
    tgt = std::move(c.tgt);
    flush();
    return sum;
  }
  LineReader in(opt.input, static_cast<size_t>(opt.max_line_bytes));
  std::string line;
  while (next_whole_line(in, &line, opt.max_line_bytes)) {
    auto [s, t] = split_tsv_line(line, in.name(), in.line());
    src.push_back(std::move(s));
    tgt.push_back(std::move(t));
    if (static_cast<int64_t>(src.size()) >= opt.window) flush();
  }
  if (!src.empty()) flush();
  return sum;
}

// The number of lines of `input` when it is a regular file (read once more,
// cheaply), or -1 for stdin, a FIFO or a device, which can be read only once.
int64_t count_input_lines(const std::string& input) {
  std::error_code ec;
  if (input.empty() || input == "-" || !std::filesystem::is_regular_file(input, ec)) return -1;
  LineReader in(input, 1);  // lines are counted, not kept
  std::string line;
  int64_t n = 0;
  while (in.next(&line)) ++n;
  return n;
}

// --evaluate: scores the input's lines (translations made elsewhere, checked
// as input lines are) against the reference as write_scores does for a
// translation. Throws nmt::Error naming the file and line of a bad line, or
// the reference when the line counts differ.
StreamSummary evaluate_lines(const StreamOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto refs = read_lines(opt.reference);
  std::vector<std::string> outputs;
  LineReader in(opt.input, static_cast<size_t>(opt.max_line_bytes));
  std::string line;
  while (next_whole_line(in, &line, opt.max_line_bytes)) {
    outputs.push_back(checked_line(line, in.name(), in.line()));
  }
  if (refs.size() != outputs.size())
    throw Error(located(opt.reference, 0, std::to_string(refs.size()) + " reference lines for " +
                                              std::to_string(outputs.size()) + " input lines"));
  StreamSummary sum;
  sum.sentences = static_cast<int64_t>(outputs.size());
  write_scores(outputs, refs, opt, &sum);
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace

StreamSummary translate_stream(const StreamOptions& opt) {
  opt.validate();
  if (opt.evaluate) return evaluate_lines(opt);
  const auto load_start = std::chrono::steady_clock::now();
  const auto device = start_runtime(opt.runtime);
  if (opt.model_paths.empty()) throw Error("no model: give -m MODEL.ckpt (several for an ensemble)");
  if (opt.info) {
    OutputFile out(opt.output);
    for (size_t i = 0; i < opt.model_paths.size(); ++i)
      out.stream() << (i > 0 ? "\n" : "") << describe_checkpoint(opt.model_paths[i]);
    out.commit();
    return {};
  }
  std::vector<LoadedModel> members;
  for (const auto& path : opt.model_paths) members.push_back(load_checkpoint(path, device));
  Translator tr(members, opt.model_paths);
  const auto& first = members.front().options;
  // The translation rate counts from here: loading is logged on its own.
  const auto t0 = std::chrono::steady_clock::now();
  spdlog::info("loaded {} ({} attention, {} decoder{}) on {} in {:.2f}s", fmt::join(opt.model_paths, ", "),
               to_string(first.attention), to_string(first.decoder),
               members.size() > 1 ? ", an ensemble of " + std::to_string(members.size()) : std::string(),
               describe_device(device), std::chrono::duration<double>(t0 - load_start).count());
  OutputFile out(opt.output);
  StreamSummary sum;
  if (opt.score_mode) {
    sum = score_pairs(opt, tr, out);
    out.commit();
  } else {
    std::vector<std::string> refs, outputs;
    if (!opt.reference.empty()) {  // read first: fail before translating
      refs = read_lines(opt.reference);
      if (const int64_t n = count_input_lines(opt.input); n >= 0 && n != static_cast<int64_t>(refs.size()))
        throw Error(located(opt.reference, 0, std::to_string(refs.size()) + " reference lines for " +
                                                  std::to_string(n) + " input lines"));
    }
    const bool n_best = opt.translate.search.n_best > 1;
    LineReader in(opt.input, static_cast<size_t>(opt.max_line_bytes));
    int64_t cropped_bytes = 0;
    std::vector<std::string> window;
    auto flush_window = [&] {
      auto hyps = tr.translate(window, opt.translate, /*with_attention=*/opt.replace_unk);
      for (size_t i = 0; i < hyps.size(); ++i) {
        const int64_t index = sum.sentences + static_cast<int64_t>(i);
        for (size_t r = 0; r < (n_best ? hyps[i].size() : 1); ++r) {
          const auto& h = hyps[i][r];
          std::string text = tr.detokenize(h, window[i], opt.replace_unk);
          if (n_best) out.stream() << index << " ||| " << text << " ||| " << format_score(h.norm_score) << '\n';
          else if (opt.scores) out.stream() << text << " ||| " << format_score(h.norm_score) << '\n';
          else out.stream() << text << '\n';
          if (r == 0) {
            sum.output_tokens += static_cast<int64_t>(h.ids.size());
            if (!opt.reference.empty()) outputs.push_back(std::move(text));
          }
        }
      }
      out.flush();
      sum.sentences += static_cast<int64_t>(window.size());
      window.clear();
    };
    std::string raw;
    bool too_long = false;
    bool tab_seen = false;
    while (in.next(&raw, &too_long)) {
      cropped_bytes += too_long;
      if (!tab_seen && raw.find('\t') != std::string::npos) {
        tab_seen = true;
        spdlog::warn("{}: line {} holds a TAB: it is translated as one sentence (to score source<TAB>target pairs, "
                     "use --score-pairs)", in.name(), in.line());
      }
      window.push_back(checked_line(raw, in.name(), in.line()));
      // A full window, or a pipe that has nothing more for now: translate what was read.
      if (static_cast<int64_t>(window.size()) >= opt.window || !in.more_ready()) flush_window();
    }
    if (!window.empty()) flush_window();
    if (cropped_bytes > 0)
      spdlog::warn("{} input lines were longer than {} bytes and were cropped (--max-line-bytes)", cropped_bytes,
                   opt.max_line_bytes);
    out.commit();  // the translations are complete: a problem with the reference below must not lose them
    if (!opt.reference.empty()) {
      if (refs.size() != outputs.size())
        throw Error(located(opt.reference, 0, std::to_string(refs.size()) + " reference lines for " +
                                                  std::to_string(outputs.size()) + " input lines"));
      write_scores(outputs, refs, opt, &sum);
    }
  }
  if (tr.cropped_inputs() > 0)
    spdlog::warn("{} input lines were longer than {} pieces and were cropped (--max-input-length)",
                 tr.cropped_inputs(), opt.translate.max_input_length);
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("{} {} sentences ({} target pieces) in {:.2f}s: {:.1f} sentences/s",
               opt.score_mode ? "scored" : "translated", sum.sentences, sum.output_tokens, sum.seconds,
               sum.sentences / std::max(sum.seconds, 1e-9));
  return sum;
}

}  // namespace nmt
