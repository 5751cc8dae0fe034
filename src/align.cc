// Attention matrices, word merging, hard alignments, AER, CSV and SVG.
#include "align.h"

#include <c10/core/InferenceMode.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "corpus.h"
#include "device.h"
#include "error.h"
#include "utf8.h"

namespace nmt {
namespace {

const std::string kWordMark = "\xe2\x96\x81";  // U+2581
const std::string kEos = "</s>";

std::vector<std::string> with_eos(std::vector<std::string> pieces) {
  pieces.push_back(kEos);
  return pieces;
}

AttentionMatrix to_matrix(const torch::Tensor& alpha, std::vector<std::string> src, std::vector<std::string> tgt) {
  AttentionMatrix m;
  m.src_tokens = std::move(src);
  m.tgt_tokens = std::move(tgt);
  auto a = alpha.to(torch::kFloat).cpu().contiguous();  // [T, S]
  auto acc = a.accessor<float, 2>();
  for (int64_t t = 0; t < a.size(0); ++t) {
    m.weights.emplace_back(a.size(1));
    for (int64_t j = 0; j < a.size(1); ++j) m.weights.back()[j] = acc[t][j];
  }
  return m;
}

// Groups token indices into words; returns each token's word and the words' text.
std::vector<int> word_groups(const std::vector<std::string>& tokens, std::vector<std::string>* words) {
  std::vector<int> group(tokens.size());
  words->clear();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto& t = tokens[i];
    const bool starts = t.rfind(kWordMark, 0) == 0;
    const bool eos = t == kEos;
    if (words->empty() || starts || eos || (i > 0 && tokens[i - 1] == kEos)) words->emplace_back();
    group[i] = static_cast<int>(words->size()) - 1;
    words->back() += starts ? t.substr(kWordMark.size()) : t;
  }
  return group;
}

bool is_eos(const std::vector<std::string>& tokens, size_t i) { return tokens[i] == kEos; }

}  // namespace

AttentionMatrix forced_attention(Translator& tr, const std::string& src, const std::string& tgt) {
  if (src.empty() || tgt.empty()) throw Error("forced alignment needs a non-empty source and target");
  auto& model = tr.model();
  const bool was_training = model->is_training();
  model->eval();
  c10::InferenceMode guard;
  const auto device = model->parameters().front().device();
  std::vector<Example> ex(1);
  ex[0].src = tr.encode_source(src);
  ex[0].tgt = tr.tgt_tokenizer().encode(tgt);
  auto batch = make_batch(ex, {0}).to(device);
  torch::Tensor alpha;
  model->forward(batch.src, batch.src_len, batch.tgt_in, &alpha);  // alpha [1, T, S]
  if (was_training) model->train();
  return to_matrix(alpha[0], with_eos(tr.src_tokenizer().pieces(src)), with_eos(tr.tgt_tokenizer().pieces(tgt)));
}

AttentionMatrix free_attention(Translator& tr, const std::string& src, const SearchOptions& search) {
  if (src.empty()) throw Error("alignment needs a non-empty source");
  TranslateOptions opt;
  opt.search = search;
  opt.search.n_best = 1;
  auto hyp = tr.translate({src}, opt, /*with_attention=*/true)[0][0];
  std::vector<std::string> tgt;
  for (int64_t id : hyp.ids) tgt.push_back(tr.tgt_tokenizer().piece(id));
  tgt.push_back(kEos);
  auto alpha = hyp.attention.narrow(0, 0, std::min<int64_t>(hyp.attention.size(0), tgt.size()));
  tgt.resize(alpha.size(0));
  return to_matrix(alpha, with_eos(tr.src_tokenizer().pieces(src)), tgt);
}

AttentionMatrix merge_to_words(const AttentionMatrix& m) {
  AttentionMatrix w;
  const auto sg = word_groups(m.src_tokens, &w.src_tokens);
  const auto tg = word_groups(m.tgt_tokens, &w.tgt_tokens);
  std::vector<int> rows_in_word(w.tgt_tokens.size(), 0);
  w.weights.assign(w.tgt_tokens.size(), std::vector<float>(w.src_tokens.size(), 0.0f));
  for (size_t t = 0; t < m.weights.size(); ++t) {
    ++rows_in_word[tg[t]];
    for (size_t j = 0; j < m.weights[t].size(); ++j) w.weights[tg[t]][sg[j]] += m.weights[t][j];  // sum over pieces
  }
  for (size_t r = 0; r < w.weights.size(); ++r)
    for (auto& v : w.weights[r]) v /= static_cast<float>(std::max(1, rows_in_word[r]));  // mean over pieces
  return w;
}

HardMethod parse_hard_method(const std::string& s) {
  if (s == "argmax") return HardMethod::kArgmax;
  if (s == "threshold") return HardMethod::kThreshold;
  throw Error("unknown alignment method '" + s + "' (expected argmax or threshold)");
}

std::set<Link> hard_alignment(const AttentionMatrix& w, HardMethod method, double threshold) {
  std::set<Link> links;
  for (size_t t = 0; t < w.weights.size(); ++t) {
    if (is_eos(w.tgt_tokens, t)) continue;
    int best = -1;
    for (size_t j = 0; j < w.weights[t].size(); ++j) {
      if (is_eos(w.src_tokens, j)) continue;
      if (method == HardMethod::kThreshold && w.weights[t][j] >= threshold) links.insert({static_cast<int>(j), static_cast<int>(t)});
      if (best < 0 || w.weights[t][j] > w.weights[t][best]) best = static_cast<int>(j);
    }
    if (method == HardMethod::kArgmax && best >= 0) links.insert({best, static_cast<int>(t)});
  }
  return links;
}

std::string to_pharaoh(const std::set<Link>& links) {
  std::string out;
  for (const auto& [i, j] : links) {
    if (!out.empty()) out += ' ';
    out += std::to_string(i) + "-" + std::to_string(j);
  }
  return out;
}

GoldAlignment parse_gold_line(const std::string& line, const std::string& path, int64_t line_no, bool one_based) {
  GoldAlignment g;
  for (const auto& tok : split_ws(line)) {
    size_t sep = tok.find_first_of("-?p");
    bool ok = sep != std::string::npos && sep > 0 && sep + 1 < tok.size();
    int i = 0, j = 0;
    if (ok) {
      try {
        size_t used_i = 0, used_j = 0;
        i = std::stoi(tok.substr(0, sep), &used_i);
        j = std::stoi(tok.substr(sep + 1), &used_j);
        ok = used_i == sep && used_j == tok.size() - sep - 1;
      } catch (...) {
        ok = false;
      }
    }
    if (one_based) { --i; --j; }
    if (!ok || i < 0 || j < 0)
      throw Error(located(path, line_no, "bad alignment link '" + tok + "' (expected i-j or i?j" +
                                             std::string(one_based ? ", 1-based" : ", 0-based") + ")"));
    g.possible.insert({i, j});
    if (tok[sep] == '-') g.sure.insert({i, j});
  }
  return g;
}

double AerScore::precision() const { return hyp ? static_cast<double>(hyp_possible) / hyp : 0.0; }
double AerScore::recall() const { return sure ? static_cast<double>(hyp_sure) / sure : 0.0; }
double AerScore::aer() const {
  return hyp + sure ? 1.0 - static_cast<double>(hyp_sure + hyp_possible) / static_cast<double>(hyp + sure) : 0.0;
}

AerScore alignment_error_rate(const std::vector<std::set<Link>>& hyp, const std::vector<GoldAlignment>& gold) {
  if (hyp.size() != gold.size())
    throw Error(std::to_string(hyp.size()) + " aligned pairs but " + std::to_string(gold.size()) + " gold lines");
  AerScore s;
  for (size_t k = 0; k < hyp.size(); ++k) {
    s.hyp += static_cast<int64_t>(hyp[k].size());
    s.sure += static_cast<int64_t>(gold[k].sure.size());
    for (const auto& l : hyp[k]) {
      s.hyp_sure += gold[k].sure.count(l);
      s.hyp_possible += gold[k].possible.count(l);
    }
  }
  return s;
}

std::string csv_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void write_csv(std::ostream& out, const AttentionMatrix& m) {
  out << "\"\"";
  for (const auto& s : m.src_tokens) out << ',' << csv_quote(s);
  out << '\n';
  const auto flags = out.flags();
  const auto precision = out.precision();
  out << std::fixed << std::setprecision(6);
  for (size_t t = 0; t < m.weights.size(); ++t) {
    out << csv_quote(m.tgt_tokens[t]);
    for (float w : m.weights[t]) out << ',' << w;
    out << '\n';
  }
  out.flags(flags);
  out.precision(precision);
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') out += "&#xFFFD;";
        else out += c;
    }
  }
  return out;
}

void write_svg(std::ostream& out, const AttentionMatrix& m) {
  constexpr int cell = 22, char_w = 8;
  size_t src_chars = 1, tgt_chars = 1;
  for (const auto& s : m.src_tokens) src_chars = std::max(src_chars, utf8_length(s));
  for (const auto& s : m.tgt_tokens) tgt_chars = std::max(tgt_chars, utf8_length(s));
  const int left = static_cast<int>(tgt_chars) * char_w + 10;
  const int top = static_cast<int>(src_chars) * char_w * 7 / 10 + 16;  // labels at -45 degrees
  const int cols = static_cast<int>(m.src_tokens.size()), rows = static_cast<int>(m.tgt_tokens.size());
  const int width = left + cols * cell + top, height = top + rows * cell + 10;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << ' ' << height << "\" font-family=\"monospace\" font-size=\"13\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  for (int j = 0; j < cols; ++j) {
    const int x = left + j * cell + cell / 2, y = top - 6;
    out << "<text x=\"" << x << "\" y=\"" << y << "\" transform=\"rotate(-45 " << x << ' ' << y << ")\">"
        << xml_escape(m.src_tokens[j]) << "</text>\n";
  }
  for (int t = 0; t < rows; ++t) {
    out << "<text x=\"" << left - 6 << "\" y=\"" << top + t * cell + cell / 2 + 4 << "\" text-anchor=\"end\">"
        << xml_escape(m.tgt_tokens[t]) << "</text>\n";
    for (int j = 0; j < cols; ++j) {
      const float w = std::clamp(m.weights[t][j], 0.0f, 1.0f);
      const int g = static_cast<int>(std::lround(w * 255));
      out << "<rect x=\"" << left + j * cell << "\" y=\"" << top + t * cell << "\" width=\"" << cell
          << "\" height=\"" << cell << "\" fill=\"rgb(" << g << ',' << g << ',' << g << ")\"><title>"
          << std::fixed << std::setprecision(3) << w << std::defaultfloat << "</title></rect>\n";
    }
  }
  out << "</svg>\n";
}

AerScore run_alignment(const AlignRunOptions& opt) {
  if (opt.format != "csv" && opt.format != "pharaoh" && opt.format != "svg")
    throw Error("unknown format '" + opt.format + "' (expected csv, pharaoh or svg)");
  if (opt.level != "subword" && opt.level != "word")
    throw Error("unknown level '" + opt.level + "' (expected subword or word)");
  if (opt.format == "svg" && opt.output_dir.empty() && opt.heatmap_dir.empty())
    throw Error("--format svg writes one file per pair: give --output-dir");
  set_threads(opt.threads);
  auto loaded = load_checkpoint(opt.model_path, resolve_device(opt.device));
  Translator tr(loaded);
  std::vector<std::string> src, tgt;
  if (!opt.tsv.empty()) {
    if (!opt.src.empty() || !opt.tgt.empty()) throw Error("give --tsv or --src/--tgt, not both");
    auto c = read_tsv(opt.tsv == "-" ? "/dev/stdin" : opt.tsv, CorpusLimits{SIZE_MAX});
    if (c.stats.empty) throw Error(located(opt.tsv, 0, "has pairs with an empty side; every pair must have both"));
    src = std::move(c.src);
    tgt = std::move(c.tgt);
  } else if (!opt.src.empty()) {
    if (opt.tgt.empty()) {
      src = read_lines(opt.src);
    } else {
      auto c = read_parallel(opt.src, opt.tgt, CorpusLimits{SIZE_MAX});
      if (c.stats.empty) throw Error(located(opt.src, 0, "has pairs with an empty side; every pair must have both"));
      src = std::move(c.src);
      tgt = std::move(c.tgt);
    }
  } else {
    throw Error("nothing to align: give --src (and --tgt for forced mode) or --tsv");
  }
  if (opt.max_pairs > 0 && static_cast<int64_t>(src.size()) > opt.max_pairs) {
    src.resize(opt.max_pairs);
    if (!tgt.empty()) tgt.resize(opt.max_pairs);
  }
  std::vector<GoldAlignment> gold;
  if (!opt.eval_gold.empty()) {
    auto lines = read_lines(opt.eval_gold);
    if (lines.size() < src.size())
      throw Error(located(opt.eval_gold, 0, std::to_string(lines.size()) + " gold lines for " +
                                               std::to_string(src.size()) + " pairs"));
    for (size_t k = 0; k < src.size(); ++k)
      gold.push_back(parse_gold_line(lines[k], opt.eval_gold, static_cast<int64_t>(k + 1), opt.gold_one_based));
  }
  for (const auto& dir : {opt.output_dir, opt.heatmap_dir}) {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec) throw Error(located(dir, 0, "cannot create folder: " + ec.message()));
  }
  const bool to_stdout = opt.output.empty() || opt.output == "-";
  const std::string tmp = to_stdout ? "" : opt.output + ".tmp";
  std::ofstream fout;
  if (!to_stdout && opt.output_dir.empty()) {
    fout.open(tmp, std::ios::binary | std::ios::trunc);
    if (!fout) throw Error(located(opt.output, 0, "cannot open output for writing"));
  }
  std::ostream& out = to_stdout ? std::cout : fout;
  auto numbered = [](const std::string& dir, size_t k, const char* ext) {
    std::ostringstream name;
    name << dir << '/' << std::setw(4) << std::setfill('0') << k + 1 << ext;
    return name.str();
  };
  auto write_file = [](const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f) throw Error(located(path, 0, "write failed"));
  };
  std::vector<std::set<Link>> hard;
  for (size_t k = 0; k < src.size(); ++k) {
    AttentionMatrix m = tgt.empty() ? free_attention(tr, src[k], opt.search) : forced_attention(tr, src[k], tgt[k]);
    AttentionMatrix words = merge_to_words(m);
    const AttentionMatrix& shown = opt.level == "word" ? words : m;
    const auto links = hard_alignment(words, opt.method, opt.threshold);
    if (!gold.empty()) hard.push_back(links);
    if (!opt.heatmap_dir.empty()) {
      std::ostringstream svg;
      write_svg(svg, shown);
      write_file(numbered(opt.heatmap_dir, k, ".svg"), svg.str());
    }
    if (opt.format == "pharaoh") {
      out << to_pharaoh(links) << '\n';
    } else if (opt.format == "svg") {
      if (!opt.output_dir.empty()) {
        std::ostringstream svg;
        write_svg(svg, shown);
        write_file(numbered(opt.output_dir, k, ".svg"), svg.str());
      }
    } else if (!opt.output_dir.empty()) {
      std::ostringstream csv;
      write_csv(csv, shown);
      write_file(numbered(opt.output_dir, k, ".csv"), csv.str());
    } else {
      if (k > 0) out << '\n';  // blocks are separated by one empty line
      write_csv(out, shown);
    }
  }
  out.flush();
  if (!out) throw Error("write failed (disk full?)");
  if (!to_stdout && fout.is_open()) {
    fout.close();
    if (!fout || std::rename(tmp.c_str(), opt.output.c_str()) != 0) throw Error(located(opt.output, 0, "cannot write output"));
  }
  AerScore score;
  if (!gold.empty()) {
    score = alignment_error_rate(hard, gold);
    spdlog::info("alignment vs {}: precision {:.4f} recall {:.4f} AER {:.4f} ({} links, {} sure gold links, {} pairs)",
                 opt.eval_gold, score.precision(), score.recall(), score.aer(), score.hyp, score.sure, hard.size());
  }
  return score;
}

}  // namespace nmt
