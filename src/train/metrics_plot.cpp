#include "trlhpc/train/metrics_plot.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "trlhpc/core/error.hpp"
#include "trlhpc/runtime/subprocess.hpp"

namespace trlhpc {

MetricsSeries read_metrics_series(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError("cannot read " + path + ": give the metrics.jsonl of a run (OUTPUT_DIR/metrics.jsonl)");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  MetricsSeries series;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto j = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      if (i + 1 == lines.size()) break;  // torn by a run killed while writing it
      throw UserError(path + " line " + std::to_string(i + 1) + ": not a JSON object (is this a metrics.jsonl?)");
    }
    if (!j.contains("step") || !j.at("step").is_number()) continue;
    const int64_t step = j.at("step").get<int64_t>();
    auto take = [&](const char* key, std::vector<std::pair<int64_t, double>>& to) {
      if (j.contains(key) && j.at(key).is_number()) to.emplace_back(step, j.at(key).get<double>());
    };
    take("loss", series.train_loss);
    take("eval_loss", series.eval_loss);
    take("learning_rate", series.learning_rate);
  }
  if (series.train_loss.empty() && series.eval_loss.empty())
    throw UserError(path + ": no line with a loss or eval_loss to plot");
  return series;
}

namespace {
// A gnuplot single-quoted string: a quote inside is doubled.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

void data_block(std::ostringstream& script, const char* name, const std::vector<std::pair<int64_t, double>>& points) {
  script << "$" << name << " << EOD\n";
  char value[64];
  for (const auto& [step, v] : points) {
    std::snprintf(value, sizeof value, "%.9g", v);
    script << step << " " << value << "\n";
  }
  script << "EOD\n";
}

// The script file, deleted when it goes out of scope.
class TemporaryFile {
 public:
  explicit TemporaryFile(const std::string& text) {
    std::string pattern = (std::filesystem::temp_directory_path() / "trlhpc-plot-XXXXXX").string();
    const int fd = mkstemp(pattern.data());
    if (fd < 0) throw RuntimeFailure("cannot create a temporary file in " + std::filesystem::temp_directory_path().string());
    path_ = pattern;
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!written) throw RuntimeFailure("cannot write " + path_);
  }
  ~TemporaryFile() { std::filesystem::remove(path_); }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};
}  // namespace

std::string gnuplot_script(const MetricsSeries& series, const std::string& output_png, const PlotOptions& o) {
  std::ostringstream s;
  data_block(s, "train", series.train_loss);
  data_block(s, "eval", series.eval_loss);
  data_block(s, "lr", series.learning_rate);
  s << "set terminal pngcairo size " << o.width << "," << o.height << " noenhanced font 'sans,10'\n"
    << "set output " << quoted(output_png) << "\n"
    << "set multiplot layout 2,1 title " << quoted(o.title) << "\n"
    << "set grid\nset key top right\nset xlabel 'step'\n"
    << "set ylabel 'loss'\n";
  std::vector<std::string> curves;
  if (!series.train_loss.empty()) curves.push_back("$train using 1:2 with lines linewidth 2 title 'train loss'");
  if (!series.eval_loss.empty())
    curves.push_back("$eval using 1:2 with linespoints pointtype 7 linewidth 2 title 'eval loss'");
  s << "plot ";
  for (size_t i = 0; i < curves.size(); ++i) s << (i ? ", " : "") << curves[i];
  s << "\nset ylabel 'learning rate'\nset format y '%.1e'\n";
  if (!series.learning_rate.empty()) s << "plot $lr using 1:2 with lines linewidth 2 title 'learning rate'\n";
  s << "unset multiplot\nunset output\n";
  return s.str();
}

void plot_metrics(const std::string& metrics_path, const std::string& output_png, PlotOptions options) {
  if (options.width < 16 || options.height < 16 || options.width > 10000 || options.height > 10000)
    throw UserError("--width/--height " + std::to_string(options.width) + "x" + std::to_string(options.height) +
                    ": must be within 16..10000 pixels");
  const MetricsSeries series = read_metrics_series(metrics_path);
  if (options.title.empty()) options.title = metrics_path;
  const TemporaryFile script(gnuplot_script(series, output_png, options));
  const std::optional<ProgramResult> result = run_program({"gnuplot", script.path()});
  if (!result)
    throw UserError("trlhpc plot needs gnuplot, which is not on PATH: install it (Debian: apt-get install gnuplot-nox; "
                    "or `make -f Makefile.hpc deps`) or load its module");
  if (result->exit_code != 0 || !std::filesystem::exists(output_png))
    throw UserError("gnuplot could not draw " + output_png + " (exit " + std::to_string(result->exit_code) +
                    "; does it have the pngcairo terminal, and is the folder writable?):\n" + result->output);
}

}  // namespace trlhpc
