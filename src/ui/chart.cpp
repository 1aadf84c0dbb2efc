// The throughput chart: one pair of bars (done, failed) per minute, drawn by the server as
// SVG so the page needs no charting script. Colours come from app.css (the CSP forbids
// inline styles).
#include <algorithm>
#include <cmath>
#include <ctime>
#include <string>

#include "ui/html.hpp"
#include "ui/pages.hpp"

namespace pgjobd::ui {
namespace {

std::string minute_label(std::int64_t epoch) {
  const auto t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M", &tm);
  return text;
}

}  // namespace

std::string render_throughput_chart(const std::vector<MinuteBucket>& buckets) {
  constexpr int kWidth = 720, kHeight = 140, kTop = 10, kBottom = 20;
  constexpr int kPlot = kHeight - kTop - kBottom;
  std::int64_t peak = 1;
  std::int64_t total_done = 0, total_failed = 0;
  for (const MinuteBucket& b : buckets) {
    peak = std::max({peak, b.done, b.failed});
    total_done += b.done;
    total_failed += b.failed;
  }
  const double slot =
      buckets.empty() ? kWidth : static_cast<double>(kWidth) / static_cast<double>(buckets.size());
  const double bar = std::max(1.0, slot / 2 - 1);
  const auto height_of = [&](std::int64_t v) {
    return static_cast<int>(
        std::lround(static_cast<double>(v) / static_cast<double>(peak) * kPlot));
  };
  std::string svg = R"(<svg id="throughput-chart" viewBox="0 0 )" + std::to_string(kWidth) + " " +
                    std::to_string(kHeight) + R"(" role="img" aria-label="jobs done ()" +
                    format_thousands(total_done) + ") and failed attempts (" +
                    format_thousands(total_failed) + ") per minute, last hour\">";
  svg += R"(<line class="axis" x1="0" y1=")" + std::to_string(kTop + kPlot) + "\" x2=\"" +
         std::to_string(kWidth) + "\" y2=\"" + std::to_string(kTop + kPlot) + "\"/>";
  svg += R"(<text class="peak" x="2" y=")" + std::to_string(kTop) + "\">" + format_thousands(peak) +
         "/min</text>";
  char number[32];
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const MinuteBucket& b = buckets[i];
    const double x = static_cast<double>(i) * slot;
    const std::string label = minute_label(b.minute_epoch);
    std::string title = "<title>" + html_escape(label) + " UTC: " + format_thousands(b.done) +
                        " done, " + format_thousands(b.failed) + " failed</title>";
    for (int series = 0; series < 2; ++series) {
      const std::int64_t value = series == 0 ? b.done : b.failed;
      const int h = height_of(value);
      if (h == 0) continue;
      std::snprintf(number, sizeof number, "%.1f", x + series * (bar + 1));
      svg += std::string("<rect class=\"") + (series == 0 ? "bar-done" : "bar-failed") + "\" x=\"" +
             number + "\" y=\"" + std::to_string(kTop + kPlot - h) + "\" width=\"";
      std::snprintf(number, sizeof number, "%.1f", bar);
      svg += std::string(number) + "\" height=\"" + std::to_string(h) + "\">" + title + "</rect>";
    }
    if (i % 15 == 0) {
      std::snprintf(number, sizeof number, "%.1f", x);
      svg += std::string(R"(<text class="tick" x=")") + number + "\" y=\"" +
             std::to_string(kHeight - 4) + "\">" + html_escape(label) + "</text>";
    }
  }
  svg += "</svg>";
  return svg;
}

}  // namespace pgjobd::ui
