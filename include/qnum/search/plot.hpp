// A small SVG line-plot writer for search curves (best value so far vs trial number, one
// series per sampler or study), with axes, ticks, a legend and points for every trial.
// Written by hand to keep plotting free of external tools: the file is plain text.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "qnum/io/atomic_file.hpp"

namespace qnum::search {

struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y); nan y values are skipped
  bool markers_only = false;                      // scatter (e.g. every trial's value)
};

namespace detail {
inline std::string svg_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}
inline std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}
// "Nice" tick step (1, 2 or 5 times a power of ten) for about n ticks over span.
inline double tick_step(double span, int n) {
  const double raw = span / n, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}
}  // namespace detail

/// The SVG text of a line plot.
inline std::string svg_line_plot(const std::vector<PlotSeries>& series, const std::string& title,
                                 const std::string& xlabel, const std::string& ylabel) {
  const double W = 720, H = 440, L = 80, R = 180, T = 40, B = 60;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(y) || !std::isfinite(x)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  if (!(x0 <= x1)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x0 == x1) x0 -= 0.5, x1 += 0.5;
  if (y0 == y1) y0 -= 0.5, y1 += 0.5;
  const double pad = 0.05 * (y1 - y0);
  y0 -= pad, y1 += pad;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                 "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  std::string o;
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + detail::num(W) + "\" height=\"" + detail::num(H) +
       "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += "<text x=\"" + detail::num(W / 2 - R / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" +
       detail::svg_escape(title) + "</text>\n";
  // Axes and ticks.
  o += "<g stroke=\"black\"><line x1=\"" + detail::num(L) + "\" y1=\"" + detail::num(H - B) + "\" x2=\"" +
       detail::num(W - R) + "\" y2=\"" + detail::num(H - B) + "\"/><line x1=\"" + detail::num(L) + "\" y1=\"" +
       detail::num(T) + "\" x2=\"" + detail::num(L) + "\" y2=\"" + detail::num(H - B) + "\"/></g>\n";
  const double xs = detail::tick_step(x1 - x0, 8), ys = detail::tick_step(y1 - y0, 6);
  for (double x = std::ceil(x0 / xs) * xs; x <= x1 + 1e-9 * xs; x += xs)
    o += "<line x1=\"" + detail::num(px(x)) + "\" y1=\"" + detail::num(H - B) + "\" x2=\"" + detail::num(px(x)) +
         "\" y2=\"" + detail::num(H - B + 5) + "\" stroke=\"black\"/><text x=\"" + detail::num(px(x)) + "\" y=\"" +
         detail::num(H - B + 18) + "\" text-anchor=\"middle\">" + detail::num(x) + "</text>\n";
  for (double y = std::ceil(y0 / ys) * ys; y <= y1 + 1e-9 * ys; y += ys)
    o += "<line x1=\"" + detail::num(L - 5) + "\" y1=\"" + detail::num(py(y)) + "\" x2=\"" + detail::num(W - R) +
         "\" y2=\"" + detail::num(py(y)) + "\" stroke=\"#ddd\"/><text x=\"" + detail::num(L - 8) + "\" y=\"" +
         detail::num(py(y) + 4) + "\" text-anchor=\"end\">" + detail::num(y) + "</text>\n";
  o += "<text x=\"" + detail::num((L + W - R) / 2) + "\" y=\"" + detail::num(H - 15) + "\" text-anchor=\"middle\">" +
       detail::svg_escape(xlabel) + "</text>\n";
  o += "<text transform=\"translate(18," + detail::num((T + H - B) / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
       detail::svg_escape(ylabel) + "</text>\n";
  for (std::size_t k = 0; k < series.size(); ++k) {
    const std::string c = colors[k % 8];
    std::string path;
    for (const auto& [x, y] : series[k].points) {
      if (!std::isfinite(y)) continue;
      o += "<circle cx=\"" + detail::num(px(x)) + "\" cy=\"" + detail::num(py(y)) + "\" r=\"2.5\" fill=\"" + c +
           "\"/>\n";
      path += (path.empty() ? "M" : " L") + detail::num(px(x)) + "," + detail::num(py(y));
    }
    if (!series[k].markers_only && !path.empty())
      o += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + c + "\" stroke-width=\"1.8\"/>\n";
    const double ly = T + 10 + 20.0 * double(k);
    o += "<rect x=\"" + detail::num(W - R + 15) + "\" y=\"" + detail::num(ly - 8) +
         "\" width=\"14\" height=\"4\" fill=\"" + c + "\"/><text x=\"" + detail::num(W - R + 35) + "\" y=\"" +
         detail::num(ly - 2) + "\">" + detail::svg_escape(series[k].label) + "</text>\n";
  }
  o += "</svg>\n";
  return o;
}

/// Writes the plot atomically.
inline void write_svg_line_plot(const std::string& path, const std::vector<PlotSeries>& series,
                                const std::string& title, const std::string& xlabel, const std::string& ylabel) {
  write_file_atomic(path, svg_line_plot(series, title, xlabel, ylabel));
}

}  // namespace qnum::search
