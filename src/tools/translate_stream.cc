// nmt-translate's streaming loop and output formats.
#include "tools/translate_stream.h"

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>

#include "base/error.h"
#include "base/format.h"
#include "base/validate.h"
#include "io/io.h"
#include "model/checkpoint.h"
#include "model/device.h"
#include "text/corpus.h"
#include "tools/stream_scores.h"
#include "translate/pick.h"

namespace nmt {
namespace {

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

// --score-pairs: one log-probability per pair, of --src/--tgt or of the
// TSV input. Fills the summary's sentences, target pieces and seconds (the
// scoring and writing, not the waits for input). Throws nmt::Error for a bad
// line (file and line named) or an empty line in --src/--tgt.
StreamSummary score_pairs(const StreamOptions& opt, Translator& tr, OutputFile& out) {
  StreamSummary sum;
  std::vector<std::string> src, tgt;
  auto flush = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    for (double s : tr.score(src, tgt, opt.translate.batch_sentences, &sum.output_tokens))
      out.stream() << format_score(s) << '\n';
    out.flush();
    sum.sentences += static_cast<int64_t>(src.size());
    sum.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    src.clear();
    tgt.clear();
  };
  if (!opt.src.empty() || !opt.tgt.empty()) {  // StreamOptions::validate() saw both
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
// as input lines are) against the references as write_scores does for a
// translation, and prints the BLEU and chrF lines (or sacreBLEU's JSON) on
// the output, which scripts read. Throws nmt::Error naming the file and line
// of a bad line, a reference or --baseline file whose line count differs,
// or an output that cannot be written (an output file is then left as it
// was).
StreamSummary evaluate_lines(const StreamOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const ScoringInputs scoring = read_scoring_inputs(opt);
  std::vector<std::string> outputs;
  LineReader in(opt.input, static_cast<size_t>(opt.max_line_bytes));
  std::string line;
  while (next_whole_line(in, &line, opt.max_line_bytes)) {
    outputs.push_back(checked_line(line, in.name(), in.line()));
  }
  check_line_counts(opt, scoring, static_cast<int64_t>(outputs.size()));
  StreamSummary sum;
  sum.sentences = static_cast<int64_t>(outputs.size());
  OutputFile out(opt.output);
  write_scores(outputs, scoring, opt, &sum, &out);
  out.commit();
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

// The features of one n-best entry `h` (whose output is `text`), in Moses'
// form ("Name= value ..."): the hypothesis' log-probability (summed over its
// pieces and EOS; an ensemble's is the mean of its members' per step), its
// length in target pieces (EOS not counted) and the GNMT length penalty it
// was divided by: score = LogProb / LengthPenalty. After rescoring also the
// log-probabilities of the mix (L2R, and R2L and CH where their models ran),
// each in the shortest form that reads back as the same double, and the
// text's words: a reranker that recomputes the mix in doubles under any
// weights and length exponent, in this order,
// (score = ((1 - w) L2R + w R2L + c CH) / ((5 + Words + 1) / 6)^a),
// makes the choice nmt-translate makes with them, to the last bit (the
// score given is then the mix in the same form); rounded figures would turn
// near ties either way. After minimum Bayes-risk selection, MBR is the
// expected utility that orders the list (mbr.h).
std::string nbest_features(const Hypothesis& h, const std::string& text, double alpha) {
  const double n = static_cast<double>(h.ids.size() + 1);
  const double penalty = alpha == 0 ? 1.0 : std::pow((5.0 + n) / 6.0, alpha);
  std::string out = "LogProb= " + format_score(h.score) + " Length= " + std::to_string(h.ids.size()) +
                    " LengthPenalty= " + format_score(penalty);
  if (!std::isnan(h.l2r_logprob)) {
    out += fmt::format(" L2R= {}", h.l2r_logprob);
    if (!std::isnan(h.r2l_logprob)) out += fmt::format(" R2L= {}", h.r2l_logprob);
    if (!std::isnan(h.channel_logprob)) out += fmt::format(" CH= {}", h.channel_logprob);
    out += fmt::format(" Words= {}", count_words(text));
  }
  if (!std::isnan(h.mbr_utility)) out += fmt::format(" MBR= {}", h.mbr_utility);
  return out;
}

// --info: the description of each checkpoint of -m on the output, one
// blank line between two. Throws nmt::Error for a checkpoint that cannot be
// read or an output that cannot be written (an output file is then left as
// it was).
StreamSummary describe_models(const StreamOptions& opt) {
  OutputFile out(opt.output);
  for (size_t i = 0; i < opt.model_paths.size(); ++i)
    out.stream() << (i > 0 ? "\n" : "") << describe_checkpoint(opt.model_paths[i]);
  out.commit();
  return {};
}

// What the read step noticed of the input: lines cropped to --max-line-bytes,
// and whether a TAB was seen (and warned about) yet.
struct InputNotes {
  int64_t cropped_bytes = 0;
  bool tab_seen = false;
};

// The read step: appends input lines to *window until it holds opt.window
// lines or the input has nothing more ready for now (a pipe that pauses):
// true then; false at the end of the input (*window may still hold lines).
// Warns once about a line holding a TAB. Throws nmt::Error naming the file
// and line of a line that is not valid text.
bool read_window(LineReader& in, const StreamOptions& opt, std::vector<std::string>* window, InputNotes* notes) {
  std::string raw;
  bool too_long = false;
  while (in.next(&raw, &too_long)) {
    notes->cropped_bytes += too_long;
    if (!notes->tab_seen && raw.find('\t') != std::string::npos) {
      notes->tab_seen = true;
      spdlog::warn("{}: line {} holds a TAB: it is translated as one sentence (to score source<TAB>target pairs, "
                   "use --score-pairs)", in.name(), in.line());
    }
    window->push_back(checked_line(raw, in.name(), in.line()));
    // A full window, or a pipe that has nothing more for now: translate what was read.
    if (static_cast<int64_t>(window->size()) >= opt.window || !in.more_ready()) return true;
  }
  return false;
}

// The write step: the hypotheses `hyps` of `window` (the translate step's,
// one list per line, best first) as output lines: the best one's text, with
// --scores its score, or with n_best > 1 every hypothesis in Moses' n-best
// form. Counts the best ones' target pieces into sum->output_tokens and, with
// `outputs`, keeps their text (to score against references). Numbers the
// lines from sum->sentences on. Throws nmt::Error when the output cannot be
// written.
void write_window(const StreamOptions& opt, Translator& tr, const std::vector<std::string>& window,
                  const std::vector<std::vector<Hypothesis>>& hyps, OutputFile& out, StreamSummary* sum,
                  std::vector<std::string>* outputs) {
  const bool n_best = opt.translate.search.n_best > 1;
  const double alpha = opt.translate.search.length_penalty;
  for (size_t i = 0; i < hyps.size(); ++i) {
    const int64_t index = sum->sentences + static_cast<int64_t>(i);
    for (size_t r = 0; r < (n_best ? hyps[i].size() : 1); ++r) {
      const auto& h = hyps[i][r];
      std::string text = tr.detokenize(h, window[i], opt.replace_unk);
      // The score that ordered the list: the expected utility after MBR, else
      // the search's or the rescoring's; in the n-best form a rescored one or
      // a utility as exact as the features, with --with-scores to 4 decimals.
      const double score = std::isnan(h.mbr_utility) ? h.norm_score : h.mbr_utility;
      const bool exact = !std::isnan(h.mbr_utility) || !std::isnan(h.l2r_logprob);
      if (n_best)  // Moses' n-best form, which rerankers read
        out.stream() << index << " ||| " << text << " ||| " << nbest_features(h, text, alpha) << " ||| "
                     << (exact ? fmt::format("{}", score) : format_score(score)) << '\n';
      else if (opt.scores) out.stream() << text << " ||| " << format_score(score) << '\n';
      else out.stream() << text << '\n';
      if (r == 0) {
        sum->output_tokens += static_cast<int64_t>(h.ids.size());
        if (outputs != nullptr) outputs->push_back(std::move(text));
      }
    }
  }
}

// Translate mode: reads the input a window at a time, translates each window
// (the translate step) and writes it in input order, flushed; then commits
// the output and, with references, logs the scores (write_scores). Fills the
// summary's sentences, target pieces and seconds (translating and writing,
// not the waits for input). Throws nmt::Error naming the file and line of a
// bad input line or of a bad line of a reference or --baseline file (before
// translating), a reference or baseline whose line count differs from the
// input's (before translating when the input is a regular file, or for the
// baseline, from the first reference's; else after the output is committed,
// which keeps the translations), or an output that cannot be written.
StreamSummary translate_lines(const StreamOptions& opt, Translator& tr, Rescorer* rescorer, OutputFile& out) {
  StreamSummary sum;
  const bool scoring = !opt.references.empty();
  ScoringInputs against;
  std::vector<std::string> outputs;
  if (scoring) {  // read first: fail before translating
    against = read_scoring_inputs(opt);
    if (const int64_t n = count_input_lines(opt.input); n >= 0) check_line_counts(opt, against, n);
    else if (!opt.baseline.empty() && against.baseline.size() != against.refs[0].size())  // a pipe: the first reference's count
      throw Error(located(opt.baseline, 0, std::to_string(against.baseline.size()) + " baseline lines for " +
                                               std::to_string(against.refs[0].size()) + " lines of " +
                                               opt.references[0]));
  }
  // A rescorer and minimum Bayes-risk selection reorder the beam's whole list.
  const TranslateOptions search_options = pick_search_options(opt.translate, rescorer, opt.mbr);
  LineReader in(opt.input, static_cast<size_t>(opt.max_line_bytes));
  InputNotes notes;
  std::vector<std::string> window;
  for (bool more = true; more;) {
    more = read_window(in, opt, &window, &notes);
    if (window.empty()) continue;
    const auto w0 = std::chrono::steady_clock::now();
    auto hyps = tr.translate(window, search_options, /*with_attention=*/opt.replace_unk);
    pick_from_beam(tr, rescorer, opt.mbr, window, opt.replace_unk, opt.translate, &hyps);
    write_window(opt, tr, window, hyps, out, &sum, scoring ? &outputs : nullptr);
    out.flush();
    sum.sentences += static_cast<int64_t>(window.size());
    sum.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    window.clear();
  }
  if (notes.cropped_bytes > 0)
    spdlog::warn("{} longer than {} bytes {} cropped (--max-line-bytes)", counted(notes.cropped_bytes, "input line"),
                 opt.max_line_bytes, notes.cropped_bytes == 1 ? "was" : "were");
  out.commit();  // the translations are complete: a problem with the reference below must not lose them
  if (scoring) {  // the output holds the translations: the scores go to stderr (and --scores-json)
    check_line_counts(opt, against, static_cast<int64_t>(outputs.size()));
    write_scores(outputs, against, opt, &sum);
  }
  return sum;
}

// Logs the end of a translate or score run: the input lines cropped to
// --max-input-length (a warning), then the lines, target pieces and rate,
// and the time since loading (`t0`) when waits for input made it longer.
// Never throws (beyond std::bad_alloc).
void log_summary(const StreamOptions& opt, const Translator& tr, const StreamSummary& sum,
                 std::chrono::steady_clock::time_point t0) {
  if (tr.cropped_inputs() > 0)
    spdlog::warn("{} longer than {} pieces {} cropped (--max-input-length)", counted(tr.cropped_inputs(), "input line"),
                 opt.translate.max_input_length, tr.cropped_inputs() == 1 ? "was" : "were");
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("{} {} ({}) in {:.2f}s: {:.1f} {}/s{}", opt.score_mode ? "scored" : "translated",
               counted(sum.sentences, opt.score_mode ? "pair" : "sentence"), counted(sum.output_tokens, "target piece"),
               sum.seconds, sum.sentences / std::max(sum.seconds, 1e-9), opt.score_mode ? "pairs" : "sentences",
               wall > sum.seconds + 0.5 ? fmt::format(" ({:.2f}s since loading, waits for input included)", wall)
                                        : std::string());
}

}  // namespace

StreamSummary translate_stream(const StreamOptions& options) {
  const StreamOptions opt = options.resolved();
  opt.validate();
  if (opt.evaluate) return evaluate_lines(opt);
  const auto load_start = std::chrono::steady_clock::now();
  const auto device = start_runtime(opt.runtime);
  if (opt.info) return describe_models(opt);
  std::vector<LoadedModel> members;
  for (const auto& path : opt.model_paths) members.push_back(load_checkpoint(path, device));
  Translator tr(members, opt.model_paths, opt.ensemble_weights);
  const auto& first = members.front().options;
  // Loading is logged on its own; the rate counts the time spent translating
  // (or scoring) and writing, not the waits for input of a pipe.
  const auto t0 = std::chrono::steady_clock::now();
  spdlog::info("loaded {} ({} attention, {} decoder{}{}{}) on {} in {:.2f}s", fmt::join(opt.model_paths, ", "),
               to_string(first.attention), to_string(first.decoder),
               members.size() > 1 ? ", an ensemble of " + std::to_string(members.size()) : std::string(),
               opt.ensemble_weights.empty() ? "" : " weighted ", fmt::join(opt.ensemble_weights, " "), describe_device(device),
               std::chrono::duration<double>(t0 - load_start).count());
  OutputFile out(opt.output);
  StreamSummary sum;
  if (opt.score_mode) {
    sum = score_pairs(opt, tr, out);
    out.commit();
  } else {
    const auto rescorer = load_rescorer(opt.rescore, device, opt.translate.search.beam_size);
    if (opt.mbr.enabled())
      spdlog::info("picking each translation from the beam's {} by minimum Bayes risk ({}, temperature {})",
                   counted(opt.translate.search.beam_size, "hypothesis", "hypotheses"), enum_name(opt.mbr.utility),
                   opt.mbr.temperature);
    sum = translate_lines(opt, tr, rescorer.get(), out);
  }
  log_summary(opt, tr, sum, t0);
  return sum;
}

}  // namespace nmt
