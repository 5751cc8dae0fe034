// Word merging, hard links, gold parsing, AER, CSV and SVG (no LibTorch).
#include "text/alignment.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iterator>

#include "base/error.h"
#include "base/utf8.h"

namespace nmt {
namespace {

const std::string kWordMark = "\xe2\x96\x81";  // U+2581
const std::string kEos = "</s>";

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

std::vector<int> piece_words(const std::vector<std::string>& pieces) {
  std::vector<int> word(pieces.size());
  int w = -1;
  for (size_t k = 0; k < pieces.size(); ++k) {
    if (w < 0 || pieces[k].rfind(kWordMark, 0) == 0) ++w;
    word[k] = w;
  }
  return word;
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

AttentionMatrix shift_rows(const AttentionMatrix& m, int shift) {
  if (shift < 0) throw Error("attention shift must be 0 or more, got " + std::to_string(shift));
  AttentionMatrix out = m;
  const size_t rows = m.weights.size();
  for (size_t t = 0; t + 1 < rows; ++t) out.weights[t] = m.weights[std::min(t + static_cast<size_t>(shift), rows - 1)];
  return out;
}

std::set<Link> swap_links(const std::set<Link>& links) {
  std::set<Link> out;
  for (const auto& [i, j] : links) out.insert({j, i});
  return out;
}

std::set<Link> symmetrize(const std::set<Link>& fwd, const std::set<Link>& rev, Symmetrization how) {
  if (how == Symmetrization::kNone || how == Symmetrization::kAverage) return fwd;
  std::set<Link> both, either = fwd;
  either.insert(rev.begin(), rev.end());
  std::set_intersection(fwd.begin(), fwd.end(), rev.begin(), rev.end(), std::inserter(both, both.end()));
  if (how == Symmetrization::kIntersection) return both;
  if (how == Symmetrization::kUnion) return either;
  std::set<Link> a = both;
  std::set<int> src_aligned, tgt_aligned;
  for (const auto& [i, j] : a) { src_aligned.insert(i); tgt_aligned.insert(j); }
  auto add = [&](const Link& l) {
    a.insert(l);
    src_aligned.insert(l.first);
    tgt_aligned.insert(l.second);
  };
  // grow-diag: add union links next to (incl. diagonally) a link already
  // chosen, when one of their words is still unaligned; repeat until stable.
  static const int kNeighbours[8][2] = {{-1, 0}, {0, -1}, {1, 0}, {0, 1}, {-1, -1}, {-1, 1}, {1, -1}, {1, 1}};
  for (bool grew = true; grew;) {
    grew = false;
    const std::set<Link> current = a;
    for (const auto& [i, j] : current) {
      for (const auto& d : kNeighbours) {
        const Link n{i + d[0], j + d[1]};
        if (either.count(n) && !a.count(n) && (!src_aligned.count(n.first) || !tgt_aligned.count(n.second))) {
          add(n);
          grew = true;
        }
      }
    }
  }
  if (how == Symmetrization::kGrowDiag) return a;
  // final(-and): union links whose words are unaligned (one of them, or both).
  const bool need_both = how == Symmetrization::kGrowDiagFinalAnd;
  for (const auto* side : {&fwd, &rev}) {
    for (const auto& l : *side) {
      const bool si = !src_aligned.count(l.first), tj = !tgt_aligned.count(l.second);
      if (need_both ? (si && tj) : (si || tj)) add(l);
    }
  }
  return a;
}

AttentionMatrix average_with_reverse(const AttentionMatrix& fwd, const AttentionMatrix& rev) {
  if (rev.weights.size() != fwd.src_tokens.size() || rev.src_tokens.size() != fwd.tgt_tokens.size())
    throw Error("the reverse model's words (" + std::to_string(rev.weights.size()) + " x " +
                std::to_string(rev.src_tokens.size()) + ") do not match the forward model's (" +
                std::to_string(fwd.src_tokens.size()) + " x " + std::to_string(fwd.tgt_tokens.size()) + ")");
  AttentionMatrix out = fwd;
  for (size_t t = 0; t < out.weights.size(); ++t)
    for (size_t s = 0; s < out.weights[t].size(); ++s) out.weights[t][s] = 0.5f * (fwd.weights[t][s] + rev.weights[s][t]);
  return out;
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

namespace {

// The text a heatmap shows for a token: a word-start piece without its
// mark, a piece continuing a word after "·", the mark alone as "␣". Words
// and "</s>" are shown as they are.
std::string shown_label(const std::string& token, bool pieces) {
  if (!pieces || token == "</s>") return token;
  if (token == kWordMark) return "\u2423";
  if (token.rfind(kWordMark, 0) == 0) return token.substr(kWordMark.size());
  return "\u00b7" + token;
}

// The same in SVG: the "·" and "␣" in gray.
std::string svg_label(const std::string& token, bool pieces) {
  if (!pieces) return xml_escape(token);
  if (token == kWordMark) return "<tspan fill=\"#999\">\u2423</tspan>";
  if (token.rfind(kWordMark, 0) == 0) return xml_escape(token.substr(kWordMark.size()));
  if (token == "</s>") return xml_escape(token);
  return "<tspan fill=\"#999\">\u00b7</tspan>" + xml_escape(token);
}

// Whether code point c is drawn a full em wide (East Asian wide and
// fullwidth forms, emoji).
bool wide(char32_t c) {
  return (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF) || (c >= 0xAC00 && c <= 0xD7A3) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
         (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1FAFF) || (c >= 0x20000 && c <= 0x3FFFD);
}

// A generous estimate of the width of `text` at `font_size` px, in px (the
// browser's fonts are unknown): 0.62 em a character (monospace fonts draw
// 0.6, sans-serif text averages about 0.5), a full em for wide characters,
// nothing for combining marks, a tenth more when `bold`.
int text_width(const std::string& text, double font_size, bool bold = false) {
  double em = 0;
  for (char32_t c : decode_utf8(text)) em += (c >= 0x300 && c <= 0x36F) ? 0.0 : wide(c) ? 1.0 : 0.62;
  return static_cast<int>(std::ceil(em * font_size * (bold ? 1.1 : 1.0)));
}

}  // namespace

void write_tidy_csv(std::ostream& out, const AttentionMatrix& m, size_t pair, bool header) {
  if (header) out << "pair,tgt_index,tgt_token,src_index,src_token,weight\n";
  const auto flags = out.flags();
  const auto precision = out.precision();
  out << std::fixed << std::setprecision(6);
  for (size_t t = 0; t < m.weights.size(); ++t)
    for (size_t j = 0; j < m.weights[t].size(); ++j)
      out << pair << ',' << t << ',' << csv_quote(m.tgt_tokens[t]) << ',' << j << ',' << csv_quote(m.src_tokens[j])
          << ',' << m.weights[t][j] << '\n';
  out.flags(flags);
  out.precision(precision);
}

void write_svg(std::ostream& out, const AttentionMatrix& m, const std::string& title) {
  constexpr int cell = 22, scale_w = 90, font = 13, small = 11, margin = 10;
  bool pieces = false;  // SentencePiece pieces (some carry the word mark), not words
  for (const auto* side : {&m.src_tokens, &m.tgt_tokens})
    for (const auto& s : *side) pieces = pieces || s.find(kWordMark) != std::string::npos;
  // Every text's size is estimated (text_width) and the picture made to hold it.
  int src_w = font, tgt_w = font;
  for (const auto& s : m.src_tokens) src_w = std::max(src_w, text_width(shown_label(s, pieces), font));
  for (const auto& s : m.tgt_tokens) tgt_w = std::max(tgt_w, text_width(shown_label(s, pieces), font));
  const std::string note = "subword pieces: \u00b7 continues the word before it, \u2423 is a space piece";
  const int cols = static_cast<int>(m.src_tokens.size()), rows = static_cast<int>(m.tgt_tokens.size());
  const int title_h = title.empty() ? 0 : 24;
  const int left = 26 + tgt_w + margin;            // axis title, labels
  const int top = title_h + 24 + src_w + margin;   // title, axis title, upright labels
  const int grid_h = std::max(rows * cell, 120);
  int width = left + cols * cell + scale_w;
  if (!title.empty()) width = std::max(width, margin + text_width(title, font, /*bold=*/true) + margin);
  if (pieces) width = std::max(width, margin + text_width(note, small) + margin);
  const int height = top + grid_h + (pieces ? 34 : 12);
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << ' ' << height << "\" font-family=\"monospace\" font-size=\"" << font << "\">\n"
      << "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">"
      << "<stop offset=\"0\" stop-color=\"rgb(0,0,0)\"/><stop offset=\"1\" stop-color=\"rgb(255,255,255)\"/>"
      << "</linearGradient></defs>\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  if (!title.empty())
    out << "<text x=\"" << margin << "\" y=\"18\" font-family=\"sans-serif\" font-weight=\"bold\">" << xml_escape(title)
        << "</text>\n";
  // Axis titles.
  out << "<text x=\"" << left + cols * cell / 2 << "\" y=\"" << title_h + 16
      << "\" text-anchor=\"middle\" font-family=\"sans-serif\" font-weight=\"bold\">source</text>\n"
      << "<text x=\"16\" y=\"" << top + rows * cell / 2 << "\" text-anchor=\"middle\" font-family=\"sans-serif\" "
      << "font-weight=\"bold\" transform=\"rotate(-90 16 " << top + rows * cell / 2 << ")\">target</text>\n";
  // Source labels read upwards, each in its own column.
  for (int j = 0; j < cols; ++j) {
    const int x = left + j * cell + cell / 2 + 4, y = top - 6;
    out << "<text x=\"" << x << "\" y=\"" << y << "\" transform=\"rotate(-90 " << x << ' ' << y << ")\">"
        << svg_label(m.src_tokens[j], pieces) << "</text>\n";
  }
  for (int t = 0; t < rows; ++t) {
    out << "<text x=\"" << left - 6 << "\" y=\"" << top + t * cell + cell / 2 + 4 << "\" text-anchor=\"end\">"
        << svg_label(m.tgt_tokens[t], pieces) << "</text>\n";
    for (int j = 0; j < cols; ++j) {
      const float w = std::clamp(m.weights[t][j], 0.0f, 1.0f);
      const int g = static_cast<int>(std::lround(w * 255));
      out << "<rect x=\"" << left + j * cell << "\" y=\"" << top + t * cell << "\" width=\"" << cell
          << "\" height=\"" << cell << "\" fill=\"rgb(" << g << ',' << g << ',' << g << ")\"><title>"
          << xml_escape(m.tgt_tokens[t]) << " / " << xml_escape(m.src_tokens[j]) << ": " << std::fixed
          << std::setprecision(3) << w << std::defaultfloat << "</title></rect>\n";
    }
  }
  // Colour scale: weight 0 (black) at the bottom to 1 (white) at the top.
  const int sx = left + cols * cell + 24, sh = std::min(grid_h, 160);
  out << "<rect x=\"" << sx << "\" y=\"" << top << "\" width=\"14\" height=\"" << sh
      << "\" fill=\"url(#scale)\" stroke=\"#888\"/>\n";
  for (const auto& [v, label] : {std::pair<double, const char*>{1.0, "1"}, {0.5, "0.5"}, {0.0, "0"}}) {
    const int y = top + static_cast<int>(std::lround((1 - v) * sh));
    out << "<line x1=\"" << sx + 14 << "\" y1=\"" << y << "\" x2=\"" << sx + 18 << "\" y2=\"" << y
        << "\" stroke=\"#888\"/><text x=\"" << sx + 21 << "\" y=\"" << y + 4 << "\" font-size=\"" << small << "\">"
        << label << "</text>\n";
  }
  out << "<text x=\"" << sx - 6 << "\" y=\"" << top + sh / 2 << "\" text-anchor=\"middle\" font-size=\"" << small
      << "\" font-family=\"sans-serif\" transform=\"rotate(-90 " << sx - 6 << ' ' << top + sh / 2
      << ")\">attention weight</text>\n";
  if (pieces)
    out << "<text x=\"" << margin << "\" y=\"" << height - 10 << "\" font-size=\"" << small
        << "\" font-family=\"sans-serif\" fill=\"#666\">" << note << "</text>\n";
  out << "</svg>\n";
}

}  // namespace nmt
