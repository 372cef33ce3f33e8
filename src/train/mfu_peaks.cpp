#include "trlhpc/train/mfu_peaks.hpp"

#include <algorithm>
#include <cstdio>
#include <span>

#include "trlhpc/ops/backend.hpp"
#include "trlhpc/ops/nominal_peak.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/runtime/topology.hpp"

namespace trlhpc {

std::string MfuPeaks::describe() const { return "MFU against " + nominal_text + "; " + measured_text; }

int64_t gemm_measurement_side(const ModelConfig& model) {
  const int64_t widest = std::max(model.hidden_size, model.intermediate_size);
  return std::clamp<int64_t>((widest + 255) / 256 * 256, 2048, 4096);
}

MfuPeaks mfu_peaks(const SftConfig& c, const ModelConfig& model, Ops& ops, const Topology& topology,
                   ProcessGroups& groups) {
  MfuPeaks peaks;
  Communicator& world = groups.world().host();
  const double ranks = static_cast<double>(groups.world().size());
  if (c.peak_flops > 0) {
    peaks.nominal = c.peak_flops;
    peaks.nominal_from_flag = true;
    peaks.nominal_text = flops_text(c.peak_flops) + " per rank (--peak_flops)";
    peaks.measured_text = "GEMM rate not measured (--peak_flops given)";
    return peaks;
  }
  // The nominal peaks add up (each rank's cores are its own); the per-rank figure is their mean, so
  // world size x nominal is the world's peak. One rank without a known peak makes the total unknown.
  const NominalPeak mine = nominal_peak(ops, topology.cpu_threads());
  double sums[2] = {mine.flops_per_second, mine.flops_per_second > 0 ? 0.0 : 1.0};  // peak, ranks unknown
  world.all_reduce(std::span<double>(sums, 2));
  peaks.nominal = sums[1] > 0 ? 0 : sums[0] / ranks;
  peaks.nominal_text = mine.describe() + (mine.cpu.empty() ? "" : " on " + mine.cpu);
  if (peaks.nominal > 0 && peaks.nominal != mine.flops_per_second)
    peaks.nominal_text = flops_text(peaks.nominal) + " per rank (mean over the ranks; rank 0: " + peaks.nominal_text + ")";
  if (sums[1] > 0 && mine.flops_per_second > 0) peaks.nominal_text += " (unknown on another rank)";
  // The measured rate: the slowest rank's, the one a synchronous step waits for.
  const int64_t side = gemm_measurement_side(model);
  double measured = measure_matmul_flops(ops, side);
  world.all_reduce(std::span<double>(&measured, 1), ReduceOp::Min);
  peaks.measured_gemm = measured;
  char text[128];
  std::snprintf(text, sizeof text, "measured GEMM %s per rank (%lld^3 %s, best of 4, slowest rank)", flops_text(measured).c_str(),
                static_cast<long long>(side), c.bf16 ? "bf16" : "fp32");
  peaks.measured_text = text;
  return peaks;
}

}  // namespace trlhpc
