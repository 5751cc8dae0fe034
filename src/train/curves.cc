// Training curves as a picture (see curves.h): four line charts laid out
// 2 x 2 in one SVG, drawn with nothing but lines, circles and text.
#include "train/curves.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>

#include "base/error.h"
#include "io/io.h"
#include "text/alignment.h"  // xml_escape

namespace nmt {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The number after "key": in a flat JSON object line, or NaN.
double number_field(const std::string& line, const char* key) {
  const std::string k = std::string("\"") + key + "\":";
  const size_t at = line.find(k);
  if (at == std::string::npos) return kNaN;
  const char* begin = line.c_str() + at + k.size();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  return end == begin ? kNaN : v;
}

// The string after "key": in a flat JSON object line (no escapes expected), or "".
std::string string_field(const std::string& line, const char* key) {
  const std::string k = std::string("\"") + key + "\":\"";
  const size_t at = line.find(k);
  if (at == std::string::npos) return "";
  const size_t end = line.find('"', at + k.size());
  return end == std::string::npos ? "" : line.substr(at + k.size(), end - at - k.size());
}

struct Series {
  std::string label;
  std::string colour;
  std::vector<std::pair<double, double>> xy;  // (step, value), finite values only
  bool marks = false;                         // a circle at each point
  bool hollow = false;                        // hollow circles and no line
};

// Tick positions for [lo, hi]: about five at 1, 2 or 5 times a power of ten;
// `spacing` gets their distance.
std::vector<double> ticks(double lo, double hi, double* spacing) {
  const double span = hi - lo;
  const double raw = span / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
  std::vector<double> out;
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k += 1) out.push_back(k * step);
  *spacing = step;
  return out;
}

// A tick label with as many decimals as the tick spacing `step` needs.
std::string fmt_tick(double v, double step) {
  const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 12);
  std::ostringstream s;
  s << std::fixed << std::setprecision(decimals) << (std::fabs(v) < step * 1e-6 ? 0.0 : v);  // never "-0"
  return s.str();
}

// One panel at (x0, y0) of size w x h, axes included.
void panel(std::ostream& out, double x0, double y0, double w, double h, const std::string& title,
           const std::vector<Series>& series, double max_step, const std::string& y_title) {
  const double left = 78, right = 14, top = 48, bottom = 40;
  const double px = x0 + left, py = y0 + top, pw = w - left - right, ph = h - top - bottom;
  out << "<text x=\"" << x0 + left << "\" y=\"" << y0 + 18 << "\" font-size=\"15\" font-weight=\"bold\">"
      << xml_escape(title) << "</text>\n";
  // Legend, on its own row under the title.
  double lx = x0 + left;
  for (const auto& s : series) {
    out << "<line x1=\"" << lx << "\" y1=\"" << y0 + 33 << "\" x2=\"" << lx + 18 << "\" y2=\"" << y0 + 33
        << "\" stroke=\"" << s.colour << "\" stroke-width=\"2.5\"" << (s.hollow ? " stroke-dasharray=\"2 3\"" : "")
        << "/>\n<text x=\"" << lx + 23 << "\" y=\"" << y0 + 37 << "\" font-size=\"12\">" << xml_escape(s.label)
        << "</text>\n";
    lx += 6.5 * static_cast<double>(s.label.size()) + 38;
  }
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& s : series)
    for (const auto& [x, y] : s.xy) lo = std::min(lo, y), hi = std::max(hi, y);
  out << "<rect x=\"" << px << "\" y=\"" << py << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"#fafafa\" stroke=\"#888\"/>\n";
  if (!(lo <= hi)) {
    out << "<text x=\"" << px + pw / 2 << "\" y=\"" << py + ph / 2 << "\" text-anchor=\"middle\" fill=\"#888\">"
        << "no data yet</text>\n";
    return;
  }
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {  // a flat line: give it room
    const double pad = std::max(std::fabs(hi) * 0.05, 1e-6);
    lo -= pad, hi += pad;
  } else {
    const double pad = (hi - lo) * 0.05;
    lo -= pad, hi += pad;
  }
  max_step = std::max(max_step, 1.0);
  auto X = [&](double step) { return px + pw * step / max_step; };
  auto Y = [&](double v) { return py + ph * (1 - (v - lo) / (hi - lo)); };
  out << "<g font-size=\"11\" fill=\"#333\">\n";
  double dy = 1, dx = 1;
  for (double t : ticks(lo, hi, &dy)) {
    out << "<line x1=\"" << px << "\" y1=\"" << Y(t) << "\" x2=\"" << px + pw << "\" y2=\"" << Y(t)
        << "\" stroke=\"#e2e2e2\"/>\n<text x=\"" << px - 5 << "\" y=\"" << Y(t) + 4 << "\" text-anchor=\"end\">"
        << fmt_tick(t, dy) << "</text>\n";
  }
  for (double t : ticks(0, max_step, &dx)) {
    out << "<line x1=\"" << X(t) << "\" y1=\"" << py + ph << "\" x2=\"" << X(t) << "\" y2=\"" << py + ph + 4
        << "\" stroke=\"#888\"/>\n<text x=\"" << X(t) << "\" y=\"" << py + ph + 16 << "\" text-anchor=\"middle\">"
        << fmt_tick(t, dx) << "</text>\n";
  }
  out << "</g>\n<text x=\"" << px + pw / 2 << "\" y=\"" << py + ph + 33
      << "\" text-anchor=\"middle\" font-size=\"12\">step</text>\n"
      << "<text x=\"" << x0 + 12 << "\" y=\"" << py + ph / 2 << "\" text-anchor=\"middle\" font-size=\"12\" "
      << "transform=\"rotate(-90 " << x0 + 12 << ' ' << py + ph / 2 << ")\">" << xml_escape(y_title) << "</text>\n";
  for (const auto& s : series) {
    if (s.xy.empty()) continue;
    if (!s.hollow && s.xy.size() > 1) {
      out << "<polyline fill=\"none\" stroke=\"" << s.colour << "\" stroke-width=\"1.8\" points=\"";
      for (const auto& [x, y] : s.xy) out << X(x) << ',' << Y(y) << ' ';
      out << "\"/>\n";
    }
    if (s.marks || s.hollow || s.xy.size() == 1)
      for (const auto& [x, y] : s.xy)
        out << "<circle cx=\"" << X(x) << "\" cy=\"" << Y(y) << "\" r=\"" << (s.hollow ? 4.5 : 3) << "\" "
            << (s.hollow ? "fill=\"none\" stroke-width=\"1.8\" stroke=\"" : "fill=\"") << s.colour << "\"><title>"
            << xml_escape(s.label) << " at step " << x << ": " << y << "</title></circle>\n";
  }
}

}  // namespace

std::vector<MetricsPoint> read_metrics(std::istream& in) {
  std::vector<MetricsPoint> points;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() != '{') continue;
    MetricsPoint p;
    p.type = string_field(line, "type");
    p.step = number_field(line, "step");
    if (p.type.empty() || !std::isfinite(p.step)) continue;
    p.train_loss = number_field(line, "train_loss");
    p.lr = number_field(line, "lr");
    p.tokens_per_s = number_field(line, "tgt_tokens_per_s");
    p.valid_nll = number_field(line, "valid_nll");
    p.bleu = number_field(line, "bleu");
    p.chrf = number_field(line, "chrf");
    points.push_back(std::move(p));
  }
  return points;
}

std::string training_curves_svg(const std::vector<MetricsPoint>& points, const std::string& title) {
  Series train_loss{"training (label-smoothed)", "#1f77b4", {}}, valid_nll{"validation", "#d62728", {}, true};
  Series bleu{"BLEU", "#2ca02c", {}, true}, chrf{"chrF", "#9467bd", {}, true};
  Series avg_bleu{"BLEU of average", "#2ca02c", {}, false, true}, avg_chrf{"chrF of average", "#9467bd", {}, false, true};
  Series lr{"learning rate", "#ff7f0e", {}}, speed{"target tokens/s", "#17becf", {}};
  double max_step = 0;
  auto add = [](Series& s, double x, double y) {
    if (std::isfinite(y)) s.xy.emplace_back(x, y);
  };
  for (const auto& p : points) {
    max_step = std::max(max_step, p.step);
    if (p.type == "train") {
      add(train_loss, p.step, p.train_loss);
      add(lr, p.step, p.lr);
      add(speed, p.step, p.tokens_per_s);
    } else if (p.type == "valid") {
      add(valid_nll, p.step, p.valid_nll);
      add(bleu, p.step, p.bleu);
      add(chrf, p.step, p.chrf);
      add(lr, p.step, p.lr);
    } else if (p.type == "average") {
      add(avg_bleu, p.step, p.bleu);
      add(avg_chrf, p.step, p.chrf);
    }
  }
  std::sort(lr.xy.begin(), lr.xy.end());
  std::vector<Series> scores{bleu, chrf};
  if (!avg_bleu.xy.empty()) scores.push_back(avg_bleu);
  if (!avg_chrf.xy.empty()) scores.push_back(avg_chrf);
  constexpr double W = 1000, H = 700, head = 34;
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
      << ' ' << H << "\" font-family=\"sans-serif\" font-size=\"13\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
      << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"17\">" << xml_escape(title)
      << "</text>\n";
  const double pw = W / 2, ph = (H - head) / 2;
  panel(out, 0, head, pw, ph, "Loss", {train_loss, valid_nll}, max_step, "cross-entropy per target token");
  panel(out, pw, head, pw, ph, "Validation scores", scores, max_step, "score");
  panel(out, 0, head + ph, pw, ph, "Learning rate", {lr}, max_step, "learning rate");
  panel(out, pw, head + ph, pw, ph, "Training speed", {speed}, max_step, "target tokens/s");
  out << "</svg>\n";
  return out.str();
}

void write_training_curves(const std::string& metrics_path, const std::string& svg_path, const std::string& title) {
  try {
    std::ifstream in(metrics_path);
    if (!in) throw Error(located(metrics_path, 0, "cannot open for reading"));
    write_file_atomic(svg_path, training_curves_svg(read_metrics(in), title));
  } catch (const std::exception& e) {
    spdlog::warn("training curves not written: {}", e.what());
  }
}

}  // namespace nmt
