// `kiln bench --report FILE.html`: a batch or concurrency sweep's JSON document drawn as one
// self-contained page (inline SVG, no script, no fonts or files fetched): latency against the
// swept value with its spread as a band, and throughput, plus the numbers as a table.
#include "bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace kiln::cli {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Num(double v) {
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e9) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
    return buf;
  }
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-2))
    std::snprintf(buf, sizeof(buf), "%.3g", v);
  else
    std::snprintf(buf, sizeof(buf), "%.*f",
                  std::fabs(v) >= 100  ? 0
                  : std::fabs(v) >= 10 ? 1
                                       : 2,
                  v);
  return buf;
}

// A "nice" axis top (1, 2 or 5 times a power of ten) at or above v.
double NiceTop(double v) {
  if (!(v > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

struct Series {
  std::string name;
  std::vector<double> y;
  std::string style;  // SVG stroke attributes
};

// One chart: x positions evenly spaced (the swept values as labels), y from 0. `band`: lower and
// upper values drawn as a shaded area (empty for none).
std::string Chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                  const std::vector<double>& xs, const std::vector<Series>& lines,
                  const std::vector<double>& band_lo, const std::vector<double>& band_hi,
                  const std::string& band_name) {
  const double w = 640, h = 340, left = 70, right = 20, top = 40, bottom = 50;
  const double pw = w - left - right, ph = h - top - bottom;
  double ymax = 0;
  for (const Series& s : lines)
    for (double v : s.y) ymax = std::max(ymax, v);
  for (double v : band_hi) ymax = std::max(ymax, v);
  ymax = NiceTop(ymax * 1.05);
  const size_t n = xs.size();
  auto X = [&](size_t i) {
    return left + (n == 1 ? pw / 2 : pw * static_cast<double>(i) / (n - 1));
  };
  auto Y = [&](double v) { return top + ph - ph * v / ymax; };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Num(w) + "\" height=\"" +
                  Num(h) + "\" viewBox=\"0 0 " + Num(w) + " " + Num(h) + "\" role=\"img\">\n";
  s += "<title>" + Escape(title) + "</title>\n";
  s += "<text x=\"" + Num(left) + "\" y=\"24\" font-size=\"15\" font-weight=\"bold\">" +
       Escape(title) + "</text>\n";
  for (int t = 0; t <= 5; ++t) {  // y grid and labels
    const double v = ymax * t / 5, y = Y(v);
    s += "<line x1=\"" + Num(left) + "\" y1=\"" + Num(y) + "\" x2=\"" + Num(left + pw) +
         "\" y2=\"" + Num(y) + "\" stroke=\"#ddd\"/>\n";
    s += "<text x=\"" + Num(left - 6) + "\" y=\"" + Num(y + 4) +
         "\" font-size=\"11\" text-anchor=\"end\">" + Num(v) + "</text>\n";
  }
  for (size_t i = 0; i < n; ++i)
    s += "<text x=\"" + Num(X(i)) + "\" y=\"" + Num(top + ph + 16) +
         "\" font-size=\"11\" text-anchor=\"middle\">" + Num(xs[i]) + "</text>\n";
  s += "<text x=\"" + Num(left + pw / 2) + "\" y=\"" + Num(h - 8) +
       "\" font-size=\"12\" text-anchor=\"middle\">" + Escape(x_label) + "</text>\n";
  s += "<text x=\"14\" y=\"" + Num(top + ph / 2) + "\" font-size=\"12\" text-anchor=\"middle\" " +
       "transform=\"rotate(-90 14 " + Num(top + ph / 2) + ")\">" + Escape(y_label) + "</text>\n";
  s += "<rect x=\"" + Num(left) + "\" y=\"" + Num(top) + "\" width=\"" + Num(pw) + "\" height=\"" +
       Num(ph) + "\" fill=\"none\" stroke=\"#888\"/>\n";
  if (!band_lo.empty()) {
    std::string pts;
    for (size_t i = 0; i < n; ++i) pts += Num(X(i)) + "," + Num(Y(band_hi[i])) + " ";
    for (size_t i = n; i-- > 0;) pts += Num(X(i)) + "," + Num(Y(band_lo[i])) + " ";
    s += "<polygon class=\"band\" points=\"" + pts + "\" fill=\"#9ecae1\" fill-opacity=\"0.45\">" +
         "<title>" + Escape(band_name) + "</title></polygon>\n";
  }
  double legend_y = top + 14;
  for (const Series& l : lines) {
    std::string pts;
    for (size_t i = 0; i < n; ++i) pts += Num(X(i)) + "," + Num(Y(l.y[i])) + " ";
    s += "<polyline class=\"series\" points=\"" + pts + "\" fill=\"none\" " + l.style + "/>\n";
    for (size_t i = 0; i < n; ++i)
      s += "<circle cx=\"" + Num(X(i)) + "\" cy=\"" + Num(Y(l.y[i])) +
           "\" r=\"3\" fill=\"#08519c\">" + "<title>" + Escape(l.name) + " at " + Num(xs[i]) +
           ": " + Num(l.y[i]) + "</title></circle>\n";
    s += "<line x1=\"" + Num(left + pw - 150) + "\" y1=\"" + Num(legend_y) + "\" x2=\"" +
         Num(left + pw - 126) + "\" y2=\"" + Num(legend_y) + "\" " + l.style + "/>\n";
    s += "<text x=\"" + Num(left + pw - 120) + "\" y=\"" + Num(legend_y + 4) +
         "\" font-size=\"11\">" + Escape(l.name) + "</text>\n";
    legend_y += 16;
  }
  if (!band_lo.empty())
    s += "<rect x=\"" + Num(left + pw - 150) + "\" y=\"" + Num(legend_y - 5) +
         "\" width=\"24\" height=\"10\" fill=\"#9ecae1\" fill-opacity=\"0.45\"/>\n<text x=\"" +
         Num(left + pw - 120) + "\" y=\"" + Num(legend_y + 4) + "\" font-size=\"11\">" +
         Escape(band_name) + "</text>\n";
  return s + "</svg>\n";
}

double At(const nlohmann::ordered_json& row, const char* a, const char* b = nullptr) {
  const nlohmann::ordered_json* v = &row;
  if (!v->contains(a)) return 0;
  v = &(*v)[a];
  if (b) {
    if (!v->contains(b)) return 0;
    v = &(*v)[b];
  }
  return v->is_number() ? v->get<double>() : 0;
}

}  // namespace

StatusOr<std::string> SweepReportHtml(const nlohmann::ordered_json& j) {
  const bool batch = j.contains("sweep");
  const bool conc = j.contains("concurrency") && j["concurrency"].is_array();
  if (!batch && !conc) return InvalidArgument("--report needs a --batch or --concurrency sweep");
  const nlohmann::ordered_json& rows = batch ? j["sweep"] : j["concurrency"];
  if (rows.empty()) return InvalidArgument("--report: the sweep has no rows");
  std::vector<double> xs, p50, p90, p99, lo, thr, extra;
  for (const auto& r : rows) {
    xs.push_back(At(r, batch ? "batch" : "concurrency"));
    p50.push_back(At(r, "latency_ms", "p50"));
    p99.push_back(At(r, "latency_ms", "p99"));
    p90.push_back(At(r, "latency_ms", "p90"));
    lo.push_back(batch ? At(r, "latency_ms", "min") : At(r, "latency_ms", "p50"));
    thr.push_back(At(r, "throughput_per_s"));
    extra.push_back(batch ? At(r, "first_run_ms") : At(r, "mean_batch"));
  }
  const std::string x_label = batch ? "batch size (one session, runs one after another)"
                                    : "concurrent clients (in process, through the batcher)";
  const std::string model = j.value("model", std::string());
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>\n<title>kiln bench: " +
      Escape(model) + "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}" +
      "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;" +
      "text-align:right}svg{display:block;margin:12px 0}</style></head><body>\n";
  h += "<h1>kiln bench: " + Escape(model) + "</h1>\n<p>" +
       Escape(batch ? "Batch sweep" : "Concurrency sweep") + "; kiln " +
       Escape(j.value("version", std::string())) + ", " + std::to_string(j.value("threads", 0)) +
       " threads, precision " + Escape(j.value("precision", std::string())) + ", device " +
       Escape(j.value("device", std::string())) + "; CPU " +
       Escape(j.value("cpu_model", std::string())) + ".</p>\n";
  std::vector<Series> lat = {{"p50", p50, "stroke=\"#08519c\" stroke-width=\"2\""},
                             {"p99", p99, "stroke=\"#de2d26\" stroke-dasharray=\"5,3\""}};
  h += Chart("Latency per run (ms)", x_label, "ms", xs, lat, lo, p99,
             batch ? "fastest to p99" : "p50 to p99");
  h += Chart(batch ? "Throughput (items/s)" : "Throughput (samples/s)", x_label, "per second", xs,
             {{"throughput", thr, "stroke=\"#31a354\" stroke-width=\"2\""}}, {}, {}, "");
  h += "<table>\n<tr><th>" + std::string(batch ? "batch" : "clients") + "</th><th>p50 ms</th>" +
       (batch ? "" : "<th>p90 ms</th>") + "<th>p99 ms</th><th>per second</th><th>" +
       (batch ? "first run ms" : "mean batch") + "</th></tr>\n";
  for (size_t i = 0; i < xs.size(); ++i)
    h += "<tr><td>" + Num(xs[i]) + "</td><td>" + Num(p50[i]) + "</td>" +
         (batch ? "" : "<td>" + Num(p90[i]) + "</td>") + "<td>" + Num(p99[i]) + "</td><td>" +
         Num(thr[i]) + "</td><td>" + Num(extra[i]) + "</td></tr>\n";
  h += "</table>\n<p>Made by <code>kiln bench --report</code> from the document "
       "<code>--json</code> writes; hover a point for its value.</p>\n</body></html>\n";
  return h;
}

Status WriteSweepReport(const std::string& path, const nlohmann::ordered_json& j) {
  KILN_ASSIGN_OR_RETURN(std::string html, SweepReportHtml(j));
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << html)) return InvalidArgument("cannot write the report to '" + path + "'");
  return OkStatus();
}

}  // namespace kiln::cli
