// nmt-translate's streaming loop and output formats.
#include "translate_stream.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include "checkpoint.h"
#include "corpus.h"
#include "device.h"
#include "error.h"
#include "metrics.h"

namespace nmt {
namespace {

std::string format_score(double s) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(4) << s;
  return o.str();
}

// Output sink: stdout, or a temporary file renamed over `path` at commit().
class Output {
 public:
  explicit Output(const std::string& path) : path_(path) {
    if (to_stdout()) return;
    tmp_ = path + ".tmp." + std::to_string(::getpid());
    file_.open(tmp_, std::ios::binary | std::ios::trunc);
    if (!file_) throw Error(located(path, 0, "cannot open output for writing"));
  }
  ~Output() {
    if (!tmp_.empty() && !committed_) std::remove(tmp_.c_str());  // never leave half a file
  }
  std::ostream& stream() { return to_stdout() ? std::cout : file_; }
  void flush() {
    stream().flush();
    if (!stream()) throw Error(located(to_stdout() ? "<stdout>" : path_, 0, "write failed (disk full?)"));
  }
  void commit() {
    flush();
    if (to_stdout()) return;
    file_.close();
    if (!file_ || std::rename(tmp_.c_str(), path_.c_str()) != 0) throw Error(located(path_, 0, "cannot write output"));
    committed_ = true;
  }

 private:
  bool to_stdout() const { return path_.empty() || path_ == "-"; }
  std::string path_, tmp_;
  std::ofstream file_;
  bool committed_ = false;
};

// Reads lines with the corpus checks (UTF-8, NUL) from stdin or a file.
class LineReader {
 public:
  explicit LineReader(const std::string& path) : name_(path.empty() || path == "-" ? "<stdin>" : path) {
    if (name_ != "<stdin>") {
      file_.open(path, std::ios::binary);
      if (!file_) throw Error(located(path, 0, "cannot open input"));
    }
  }
  // The next raw line (unvalidated), with its number counted.
  bool next_raw(std::string* raw) {
    std::istream& in = name_ == "<stdin>" ? std::cin : file_;
    if (!std::getline(in, *raw)) {
      if (in.bad()) throw Error(located(name_, line_, "read error"));
      return false;
    }
    ++line_;
    return true;
  }
  // The next line, validated and trimmed.
  bool next(std::string* line) {
    if (!next_raw(&raw_)) return false;
    *line = checked_line(raw_, name_, line_);
    return true;
  }
  const std::string& name() const { return name_; }
  int64_t line() const { return line_; }

 private:
  std::string name_, raw_;
  std::ifstream file_;
  int64_t line_ = 0;
};

StreamSummary score_pairs(const StreamOptions& opt, Translator& tr, Output& out) {
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
    if (opt.src.empty() || opt.tgt.empty()) throw Error("--score needs both --src and --tgt (or a TSV input)");
    auto c = read_parallel(opt.src, opt.tgt, CorpusLimits{SIZE_MAX});
    if (c.stats.empty > 0) throw Error(located(opt.src, 0, "--score with two files needs no empty lines; use a TSV input"));
    src = std::move(c.src);
    tgt = std::move(c.tgt);
    flush();
    return sum;
  }
  LineReader in(opt.input);
  std::string line;
  while (in.next_raw(&line)) {
    auto [s, t] = split_tsv_line(line, in.name(), in.line());
    src.push_back(std::move(s));
    tgt.push_back(std::move(t));
    if (static_cast<int64_t>(src.size()) >= opt.window) flush();
  }
  if (!src.empty()) flush();
  return sum;
}

}  // namespace

StreamSummary translate_stream(const StreamOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  set_threads(opt.threads);
  auto device = resolve_device(opt.device);
  auto loaded = load_checkpoint(opt.model_path, device);
  Translator tr(loaded);
  make_search(opt.translate.search);  // reject bad search options before reading input
  spdlog::info("loaded {} ({} attention) on {}", opt.model_path, to_string(loaded.options.attention),
               describe_device(device));
  Output out(opt.output);
  StreamSummary sum;
  if (opt.score_mode) {
    sum = score_pairs(opt, tr, out);
  } else {
    std::vector<std::string> refs, outputs;
    if (!opt.reference.empty()) refs = read_lines(opt.reference);  // read first: fail before translating
    const bool n_best = opt.translate.search.n_best > 1;
    LineReader in(opt.input);
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
    std::string line;
    while (in.next(&line)) {
      window.push_back(std::move(line));
      if (static_cast<int64_t>(window.size()) >= opt.window) flush_window();
    }
    if (!window.empty()) flush_window();
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
  }
  out.commit();
  if (tr.cropped_inputs() > 0)
    spdlog::warn("{} input lines were longer than {} pieces and were cropped (--max-input-length)",
                 tr.cropped_inputs(), opt.translate.max_input_length);
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("{} {} sentences ({} output tokens) in {:.2f}s: {:.1f} sentences/s",
               opt.score_mode ? "scored" : "translated", sum.sentences, sum.output_tokens, sum.seconds,
               sum.sentences / std::max(sum.seconds, 1e-9));
  return sum;
}

}  // namespace nmt
