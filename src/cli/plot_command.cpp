#include "trlhpc/cli/plot_command.hpp"

#include <boost/program_options.hpp>
#include <cstdio>
#include <sstream>

#include "trlhpc/core/error.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/train/metrics_plot.hpp"

namespace trlhpc {

int run_plot_command(const std::vector<std::string>& args, MpiEnvironment& mpi) {
  namespace po = boost::program_options;
  std::string metrics, output;
  PlotOptions options;
  bool help = false;
  po::options_description desc("usage: trlhpc plot METRICS.jsonl -o loss.png");
  desc.add_options()("help,h", po::bool_switch(&help), "print this help")(
      "metrics", po::value<std::string>(&metrics), "a run's metrics.jsonl (or give it first, unnamed)")(
      "output,o", po::value<std::string>(&output), "the PNG to write")(
      "title", po::value<std::string>(&options.title), "plot title (default: the metrics file)")(
      "width", po::value<int>(&options.width)->default_value(options.width), "pixels")(
      "height", po::value<int>(&options.height)->default_value(options.height), "pixels");
  po::positional_options_description positional;
  positional.add("metrics", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(std::string("trlhpc plot: ") + e.what() + " (see trlhpc plot --help)");
  }
  if (help) {
    std::ostringstream text;
    text << desc;
    if (mpi.world_rank() == 0) std::printf("%s\n", text.str().c_str());
    return 0;
  }
  if (metrics.empty()) throw UserError("trlhpc plot: name the metrics file (trlhpc plot OUTPUT_DIR/metrics.jsonl -o loss.png)");
  if (output.empty()) throw UserError("trlhpc plot: -o FILE.png is required");
  if (mpi.world_rank() != 0) return 0;
  plot_metrics(metrics, output, options);
  std::printf("wrote %s\n", output.c_str());
  return 0;
}

}  // namespace trlhpc
