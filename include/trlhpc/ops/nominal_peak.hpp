#pragma once
// The nominal peak FLOP/s of a rank: what the ISA its GEMM dispatch uses could do on the cores it runs
// on, FLOP/cycle per core x cores x clock. It is PaLM's MFU denominator ("the theoretical peak",
// Chowdhery et al. 2022, appendix B); the measured GEMM rate (backend.hpp, measure_matmul_flops) is the
// second reference the log reports beside it.
//
// NOMINAL, not measured. Per core FLOP/cycle (fp32, or bf16 for the bf16 ISAs; an FMA counts 2):
//   ISA           Intel (and other x86)                     AMD
//   no FMA        8  (4-lane multiply + 4-lane add, SSE)    8
//   AVX2 FMA      32 (2 FMA units x 8 lanes x 2)            32 (Zen 2-5: 2 x 256-bit FMA)
//   AVX-512 FMA   64 (2 FMA units x 16 lanes x 2)           Zen 4: 32 (512-bit ops double-pumped through
//                                                           the 2 x 256-bit FMAs); Zen 5: 64 (2 x 512-bit)
//   AVX512-BF16   128 (VDPBF16PS: 2 bf16 products per       Zen 4: 64; Zen 5: 128
//                 fp32 lane, 2x the AVX-512 FMA rate)
//   AMX-BF16      1024 (TDPBF16PS: 16 x 16 x 32 products    -
//                 = 16384 FLOP per 16 cycles per core)
// CPUID does not report the FMA unit count, so the table follows the vendor and family: Intel Xeon
// Scalable Gold/Platinum, Sapphire/Emerald/Granite Rapids have two 512-bit FMA units; Xeon Silver/Bronze
// and client cores with AVX-512 (Ice/Tiger Lake) have one, and Zen 1 and mobile Zen 5 (Strix) run
// 256/512-bit FMAs at half rate: there the nominal peak is twice the hardware's, and MFU half the truth.
// Clock: /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq (the highest turbo the driver reports;
// under all-core AVX-512/AMX load cores run 10-30 % below it, so the peak is high and MFU low by that), else
// the highest "cpu MHz" of /proc/cpuinfo (virtual machines without cpufreq: the host's nominal clock;
// on bare metal a snapshot, possibly an idle low clock, so MFU can read high). Cores: the threads the
// rank computes with; SMT siblings share their core's FMA units, so threads beyond the physical cores
// raise the nominal peak without raising the hardware's.
#include <string>

#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc {

class Ops;

struct CpuClock {
  double hz = 0;       // 0: unknown
  std::string source;  // where hz was read
};

// From the text of cpuinfo_max_freq (kHz; "" when absent) and of /proc/cpuinfo (the largest "cpu MHz").
CpuClock cpu_clock_from(const std::string& cpuinfo_max_freq_khz, const std::string& proc_cpuinfo);
CpuClock read_cpu_clock();  // the same from this machine's files

struct NominalPeak {
  double flops_per_second = 0;  // per rank; 0: unknown (a CUDA device, or no clock found)
  double flops_per_cycle = 0;   // per core, the table above
  int cores = 0;
  CpuClock clock;
  std::string isa;          // "AVX-512 FMA"
  std::string cpu;          // the CPU's brand string
  std::string unknown_why;  // flops_per_second 0: why
  // "166.4 GFLOP/s nominal (AVX-512 FMA: 64 FLOP/cycle x 1 core x 2.60 GHz, /proc/cpuinfo cpu MHz)".
  std::string describe() const;
};

double nominal_flops_per_cycle(cpu::GemmIsa isa, const cpu::CpuModel& cpu);
const char* gemm_isa_name(cpu::GemmIsa isa);
NominalPeak nominal_peak(cpu::GemmIsa isa, const cpu::CpuModel& cpu, int cores, const CpuClock& clock);
// The nominal peak of `ops`' compute dtype on `cores` threads of this CPU (fp32: fp32_gemm_isa, BF16:
// bf16_gemm_isa); unknown on a CUDA device (no table of GPUs: pass --peak_flops).
NominalPeak nominal_peak(const Ops& ops, int cores);

// "166.4 GFLOP/s" (T, G or M as fits).
std::string flops_text(double flops_per_second);

}  // namespace trlhpc
