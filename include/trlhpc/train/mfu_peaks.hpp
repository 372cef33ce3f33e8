#pragma once
// The two references MFU is reported against (CONTRACT.md, metrics.jsonl):
//   nominal: what the hardware could do (ops/nominal_peak.hpp: ISA x cores x clock), or --peak_flops.
//            The `mfu` of the logs, PaLM's MFU: model FLOPs / (seconds x world size x nominal).
//   measured GEMM: the backend's best rate on a large square GEMM in the run's compute dtype
//            (measure_matmul_flops), the `mfu_of_gemm_rate` of the logs: how close the step comes to
//            what the GEMM kernel reaches on this machine. Not measured with --peak_flops (no seconds
//            spent timing at start-up; tests and soak runs pass it).
#include <string>

#include "trlhpc/model/model_config.hpp"
#include "trlhpc/train/sft_config.hpp"

namespace trlhpc {

class Ops;
class ProcessGroups;
class Topology;

struct MfuPeaks {
  double nominal = 0;        // FLOP/s per rank: the mean over the world's ranks; 0 unknown (CUDA, no flag)
  double measured_gemm = 0;  // FLOP/s per rank: the slowest rank's; 0 when not measured
  bool nominal_from_flag = false;  // --peak_flops
  std::string nominal_text;        // global rank 0's nominal peak, how it was reckoned
  std::string measured_text;       // "measured GEMM <rate> (<shape, dtype>)", or why none was made
  // For the start line: "MFU against <nominal_text>; <measured_text>".
  std::string describe() const;
};

// The side of the measured square GEMM: the model's widest GEMM dimension (hidden or intermediate size)
// rounded up to 256, within [2048, 4096] (larger cubes would spend seconds at start-up on a CPU).
int64_t gemm_measurement_side(const ModelConfig& model);

// Collective over the world group (each rank reckons its own, the results are combined as above).
MfuPeaks mfu_peaks(const SftConfig& config, const ModelConfig& model, Ops& ops, const Topology& topology,
                   ProcessGroups& groups);

}  // namespace trlhpc
