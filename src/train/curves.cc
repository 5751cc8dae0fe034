// Training curves as a picture (see curves.h): four line charts laid out
// 2 x 2 in one SVG, drawn with nothing but lines, circles and text;
// metrics.jsonl is read with nlohmann/json.
#include "train/curves.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
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

struct Series {
  std::string label;
  std::string colour;
  std::vector<std::pair<double, double>> xy;  // (step, value), finite values only
  bool marks = false;                         // a circle at each point
  bool hollow = false;                        // hollow circles and no line
  bool steps = false;                         // a step function: each value holds until the next point
  std::string css = "";                       // the line's class attribute (for readers of the SVG)
};

// What every panel marks besides its series.
struct Marks {
  std::vector<std::pair<double, int64_t>> epoch_ends;  // (step, epoch): the last line of each epoch but the newest
  double best_step = kNaN;                             // the step of best.ckpt (NaN: unknown)
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

// A tick label with as many digits as the tick spacing `step` needs; on an
// axis whose largest tick magnitude `largest` is below 0.001 (learning rates)
// in scientific notation ("2.5e-04"), which stays short.
std::string fmt_tick(double v, double step, double largest) {
  std::ostringstream s;
  if (std::fabs(v) < step * 1e-6) return "0";  // never "-0"
  if (largest > 0 && largest < 1e-3) {
    const int digits = std::clamp(static_cast<int>(std::floor(std::log10(largest) + 1e-9) -
                                                   std::floor(std::log10(step) + 1e-9)), 0, 6);
    s << std::scientific << std::setprecision(digits) << v;
    return s.str();
  }
  const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 12);
  s << std::fixed << std::setprecision(decimals) << v;
  return s.str();
}

// The points of `s`'s line: as given, or for a step function each value
// carried to the next point's step before the next value.
std::vector<std::pair<double, double>> line_points(const Series& s) {
  if (!s.steps) return s.xy;
  std::vector<std::pair<double, double>> out;
  for (size_t i = 0; i < s.xy.size(); ++i) {
    if (i > 0 && s.xy[i].first > s.xy[i - 1].first) out.emplace_back(s.xy[i].first, s.xy[i - 1].second);
    out.push_back(s.xy[i]);
  }
  return out;
}

// A panel's plot area (px, py, pw x ph) and the ranges it shows: steps 0 to
// max_step across, values lo to hi up; X() and Y() map them to the picture.
struct Plot {
  double px, py, pw, ph;
  double lo, hi, max_step;
  double X(double step) const { return px + pw * step / max_step; }
  double Y(double v) const { return py + ph * (1 - (v - lo) / (hi - lo)); }
};

// A panel's title at (x, y0) and its legend on its own row under it, one
// entry per series. Never throws (beyond std::bad_alloc).
void draw_legend(std::ostream& out, double x, double y0, const std::string& title, const std::vector<Series>& series) {
  out << "<text x=\"" << x << "\" y=\"" << y0 + 18 << "\" font-size=\"15\" font-weight=\"bold\">"
      << xml_escape(title) << "</text>\n";
  // Legend, on its own row under the title.
  double lx = x;
  for (const auto& s : series) {
    out << "<line x1=\"" << lx << "\" y1=\"" << y0 + 33 << "\" x2=\"" << lx + 18 << "\" y2=\"" << y0 + 33
        << "\" stroke=\"" << s.colour << "\" stroke-width=\"2.5\"" << (s.hollow ? " stroke-dasharray=\"2 3\"" : "")
        << "/>\n<text x=\"" << lx + 23 << "\" y=\"" << y0 + 37 << "\" font-size=\"12\">" << xml_escape(s.label)
        << "</text>\n";
    lx += 6.5 * static_cast<double>(s.label.size()) + 38;
  }
}

// The value range that `series` shows into *lo and *hi, padded: 5% either
// side, or for a flat line half its value. False (and nothing padded) when
// the series hold no point.
bool value_range(const std::vector<Series>& series, double* lo, double* hi) {
  *lo = std::numeric_limits<double>::infinity(), *hi = -*lo;
  for (const auto& s : series)
    for (const auto& [x, y] : s.xy) *lo = std::min(*lo, y), *hi = std::max(*hi, y);
  if (!(*lo <= *hi)) return false;
  if (*hi - *lo <= 1e-9 * std::fabs(*hi)) {  // a flat line (a constant rate): half its value either side
    const double pad = *hi != 0 ? std::fabs(*hi) * 0.5 : 1.0;
    *lo -= pad, *hi += pad;
  } else {
    const double pad = (*hi - *lo) * 0.05;
    *lo -= pad, *hi += pad;
  }
  return true;
}

// The ticks, their labels and the axis titles of `plot` ("step" across,
// `y_title` up, at x0 + 12). Never throws (beyond std::bad_alloc).
void draw_axes(std::ostream& out, const Plot& plot, double x0, const std::string& y_title) {
  const double px = plot.px, py = plot.py, pw = plot.pw, ph = plot.ph;
  out << "<g font-size=\"11\" fill=\"#333\">\n";
  double dy = 1, dx = 1;
  const auto y_ticks = ticks(plot.lo, plot.hi, &dy);
  double largest = 0;
  for (double t : y_ticks) largest = std::max(largest, std::fabs(t));
  for (double t : y_ticks) {
    out << "<line x1=\"" << px << "\" y1=\"" << plot.Y(t) << "\" x2=\"" << px + pw << "\" y2=\"" << plot.Y(t)
        << "\" stroke=\"#e2e2e2\"/>\n<text x=\"" << px - 5 << "\" y=\"" << plot.Y(t) + 4 << "\" text-anchor=\"end\">"
        << fmt_tick(t, dy, largest) << "</text>\n";
  }
  for (double t : ticks(0, plot.max_step, &dx)) {
    out << "<line x1=\"" << plot.X(t) << "\" y1=\"" << py + ph << "\" x2=\"" << plot.X(t) << "\" y2=\"" << py + ph + 4
        << "\" stroke=\"#888\"/>\n<text x=\"" << plot.X(t) << "\" y=\"" << py + ph + 16 << "\" text-anchor=\"middle\">"
        << fmt_tick(t, dx, plot.max_step) << "</text>\n";
  }
  out << "</g>\n<text x=\"" << px + pw / 2 << "\" y=\"" << py + ph + 33
      << "\" text-anchor=\"middle\" font-size=\"12\">step</text>\n"
      << "<text x=\"" << x0 + 12 << "\" y=\"" << py + ph / 2 << "\" text-anchor=\"middle\" font-size=\"12\" "
      << "transform=\"rotate(-90 " << x0 + 12 << ' ' << py + ph / 2 << ")\">" << xml_escape(y_title) << "</text>\n";
}

// The epoch ends of `marks` in `plot` and, with `show_best`, its best
// checkpoint. Never throws (beyond std::bad_alloc).
void draw_marks(std::ostream& out, const Plot& plot, const Marks& marks, bool show_best) {
  const double px = plot.px, py = plot.py, pw = plot.pw, ph = plot.ph;
  // Epoch ends: a dashed line each, numbered where there is room.
  double last_label = -1e9;
  for (const auto& [step, epoch] : marks.epoch_ends) {
    const double x = plot.X(step);
    out << "<line class=\"epoch-end\" x1=\"" << x << "\" y1=\"" << py << "\" x2=\"" << x << "\" y2=\"" << py + ph
        << "\" stroke=\"#aaa\" stroke-dasharray=\"3 3\"><title>end of epoch " << epoch << " (step " << step
        << ")</title></line>\n";
    if (x - last_label >= 40) {
      out << "<text class=\"epoch-label\" x=\"" << x - 3 << "\" y=\"" << py + ph - 5
          << "\" text-anchor=\"end\" font-size=\"10\" fill=\"#888\">epoch " << epoch << "</text>\n";
      last_label = x;
    }
  }
  if (show_best && std::isfinite(marks.best_step)) {
    const double x = plot.X(marks.best_step);
    const bool right_half = x > px + pw / 2;
    out << "<line class=\"best-checkpoint\" x1=\"" << x << "\" y1=\"" << py << "\" x2=\"" << x << "\" y2=\""
        << py + ph << "\" stroke=\"#b8860b\" stroke-width=\"1.5\" stroke-dasharray=\"6 3\"><title>best.ckpt: step "
        << marks.best_step << "</title></line>\n"
        << "<text class=\"best-checkpoint-label\" x=\"" << (right_half ? x - 4 : x + 4) << "\" y=\"" << py + 13
        << "\" text-anchor=\"" << (right_half ? "end" : "start") << "\" font-size=\"11\" fill=\"#8b6508\">best.ckpt (step "
        << marks.best_step << ")</text>\n";
  }
}

// Each series of `series` in `plot`: its line, and circles where it has
// marks, is hollow or has one point. Never throws (beyond std::bad_alloc).
void draw_series(std::ostream& out, const Plot& plot, const std::vector<Series>& series) {
  for (const auto& s : series) {
    if (s.xy.empty()) continue;
    if (!s.hollow && s.xy.size() > 1) {
      out << "<polyline";
      if (!s.css.empty()) out << " class=\"" << s.css << "\"";
      out << " fill=\"none\" stroke=\"" << s.colour << "\" stroke-width=\"1.8\" points=\"";
      for (const auto& [x, y] : line_points(s)) out << plot.X(x) << ',' << plot.Y(y) << ' ';
      out << "\"/>\n";
    }
    if (s.marks || s.hollow || s.xy.size() == 1)
      for (const auto& [x, y] : s.xy)
        out << "<circle cx=\"" << plot.X(x) << "\" cy=\"" << plot.Y(y) << "\" r=\"" << (s.hollow ? 4.5 : 3) << "\" "
            << (s.hollow ? "fill=\"none\" stroke-width=\"1.8\" stroke=\"" : "fill=\"") << s.colour << "\"><title>"
            << xml_escape(s.label) << " at step " << x << ": " << y << "</title></circle>\n";
  }
}

// One panel at (x0, y0) of size w x h, axes included, with the epoch ends
// of `marks` and, with `show_best`, its best checkpoint; "no data yet" when
// no series has a point. Never throws (beyond std::bad_alloc).
void panel(std::ostream& out, double x0, double y0, double w, double h, const std::string& title,
           const std::vector<Series>& series, double max_step, const std::string& y_title, const Marks& marks,
           bool show_best) {
  const double left = 78, right = 14, top = 48, bottom = 40;
  const double px = x0 + left, py = y0 + top, pw = w - left - right, ph = h - top - bottom;
  draw_legend(out, x0 + left, y0, title, series);
  double lo = 0, hi = 0;
  const bool any = value_range(series, &lo, &hi);
  out << "<rect x=\"" << px << "\" y=\"" << py << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"#fafafa\" stroke=\"#888\"/>\n";
  if (!any) {
    out << "<text x=\"" << px + pw / 2 << "\" y=\"" << py + ph / 2 << "\" text-anchor=\"middle\" fill=\"#888\">"
        << "no data yet</text>\n";
    return;
  }
  const Plot plot{px, py, pw, ph, lo, hi, std::max(max_step, 1.0)};
  draw_axes(out, plot, x0, y_title);
  draw_marks(out, plot, marks, show_best);
  draw_series(out, plot, series);
}

}  // namespace

std::vector<MetricsPoint> read_metrics(std::istream& in) {
  std::vector<MetricsPoint> points;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;  // not JSON (parse failures are "discarded", not objects), or not an object
    auto number = [&](const char* key) {
      const auto it = j.find(key);
      return it != j.end() && it->is_number() ? it->get<double>() : kNaN;
    };
    const auto type = j.find("type");
    if (type == j.end() || !type->is_string()) continue;
    MetricsPoint p;
    p.type = type->get<std::string>();
    p.step = number("step");
    if (!std::isfinite(p.step)) continue;
    p.epoch = number("epoch");
    p.train_loss = number("train_loss");
    p.lr = number("lr");
    p.tokens_per_s = number("tgt_tokens_per_s");
    p.valid_nll = number("valid_nll");
    p.bleu = number("bleu");
    p.chrf = number("chrf");
    const auto best = j.find("new_best");
    p.new_best = best != j.end() && best->is_boolean() && best->get<bool>();
    points.push_back(std::move(p));
  }
  return points;
}

std::string training_curves_svg(const std::vector<MetricsPoint>& points, const std::string& title) {
  Series train_loss{"training (label-smoothed)", "#1f77b4", {}}, valid_nll{"validation", "#d62728", {}, true};
  Series bleu{"BLEU", "#2ca02c", {}, true}, chrf{"chrF", "#9467bd", {}, true};
  Series avg_bleu{"BLEU of average", "#2ca02c", {}, false, true}, avg_chrf{"chrF of average", "#9467bd", {}, false, true};
  Series lr{"learning rate", "#ff7f0e", {}}, speed{"target tokens/s", "#17becf", {}};
  lr.steps = true;
  lr.css = "learning-rate";
  train_loss.css = "train-loss", valid_nll.css = "valid-loss", bleu.css = "bleu", chrf.css = "chrf";
  speed.css = "speed";
  // The lines in order; a step below an earlier line's, or equal to an
  // earlier line's of the same type (a run resumed from an older last.ckpt
  // logs those steps again), supersedes what was logged from there on.
  std::vector<const MetricsPoint*> kept;
  for (const auto& p : points) {
    while (!kept.empty() && (kept.back()->step > p.step || (kept.back()->step == p.step && kept.back()->type == p.type)))
      kept.pop_back();
    kept.push_back(&p);
  }
  Marks marks;
  const MetricsPoint* previous = nullptr;  // the previous train or valid line with an epoch
  for (const auto* p : kept) {
    if ((p->type != "train" && p->type != "valid") || !std::isfinite(p->epoch)) continue;
    if (previous != nullptr && p->epoch > previous->epoch)
      marks.epoch_ends.emplace_back(previous->step, static_cast<int64_t>(previous->epoch));
    previous = p;
    if (p->type == "valid" && p->new_best) marks.best_step = p->step;
  }
  double max_step = 0;
  auto add = [](Series& s, double x, double y) {
    if (std::isfinite(y)) s.xy.emplace_back(x, y);
  };
  for (const auto* pp : kept) {
    const auto& p = *pp;
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
  panel(out, 0, head, pw, ph, "Loss", {train_loss, valid_nll}, max_step, "cross-entropy per target token", marks, false);
  panel(out, pw, head, pw, ph, "Validation scores", scores, max_step, "score", marks, true);
  panel(out, 0, head + ph, pw, ph, "Learning rate", {lr}, max_step, "learning rate", marks, false);
  panel(out, pw, head + ph, pw, ph, "Training speed", {speed}, max_step, "target tokens/s", marks, false);
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
