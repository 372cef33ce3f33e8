#pragma once
// `trlhpc plot`: the curves of a metrics.jsonl (train loss, eval loss, learning rate against the
// optimizer step) as a PNG, drawn by gnuplot's pngcairo terminal (Debian: gnuplot-nox), which trlhpc
// runs as a program with a generated script: the data goes in as inline data blocks, so nothing but
// the script file (a temporary, removed afterwards) and the PNG is written.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trlhpc {

struct MetricsSeries {
  std::vector<std::pair<int64_t, double>> train_loss, eval_loss, learning_rate;  // (step, value)
};

// The series of a metrics.jsonl (CONTRACT.md). UserError naming the file and line for a line that is
// not a JSON object (a torn last line, as a killed run may leave, is skipped), and when no line has a
// loss.
MetricsSeries read_metrics_series(const std::string& path);

struct PlotOptions {
  int width = 900, height = 600;  // pixels
  std::string title;              // default: the metrics file's path
};

// The gnuplot program that draws `series` into `output_png`: two panels sharing the step axis, loss
// (train line, eval points) above, learning rate below.
std::string gnuplot_script(const MetricsSeries& series, const std::string& output_png, const PlotOptions& options);

// Reads `metrics_path`, runs gnuplot, writes `output_png`. UserError when gnuplot is not installed
// (what to install) or fails (its message).
void plot_metrics(const std::string& metrics_path, const std::string& output_png, PlotOptions options);

}  // namespace trlhpc
