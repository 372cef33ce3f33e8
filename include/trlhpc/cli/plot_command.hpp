#pragma once
// `trlhpc plot METRICS.jsonl -o loss.png [--title T] [--width W] [--height H]`: train/eval loss and
// learning rate against the step, drawn by gnuplot (train/metrics_plot.hpp). Rank 0 draws.
#include <string>
#include <vector>

namespace trlhpc {

class MpiEnvironment;

int run_plot_command(const std::vector<std::string>& args, MpiEnvironment& mpi);

}  // namespace trlhpc
