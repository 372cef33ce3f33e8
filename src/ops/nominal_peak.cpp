// The nominal peak table and its inputs (include/trlhpc/ops/nominal_peak.hpp has the table and its
// sources).
#include "trlhpc/ops/nominal_peak.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "trlhpc/ops/ops.hpp"

namespace trlhpc {
namespace {

std::string file_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return in ? text.str() : "";
}

// AMD families: 0x17 Zen 1/2, 0x19 Zen 3/4 (only Zen 4 has AVX-512), 0x1A Zen 5.
bool amd_zen5_or_later(const cpu::CpuModel& cpu) { return cpu.vendor == cpu::CpuVendor::Amd && cpu.family >= 0x1A; }
bool amd_before_zen5(const cpu::CpuModel& cpu) { return cpu.vendor == cpu::CpuVendor::Amd && cpu.family < 0x1A; }

}  // namespace

CpuClock cpu_clock_from(const std::string& cpuinfo_max_freq_khz, const std::string& proc_cpuinfo) {
  char* end = nullptr;
  const double khz = std::strtod(cpuinfo_max_freq_khz.c_str(), &end);
  if (end != cpuinfo_max_freq_khz.c_str() && khz > 0)
    return {khz * 1e3, "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"};
  double mhz = 0;  // the fastest core at the moment of reading: an idle core may sit lower
  std::istringstream lines(proc_cpuinfo);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) mhz = std::max(mhz, std::strtod(line.c_str() + colon + 1, nullptr));
  }
  if (mhz > 0) return {mhz * 1e6, "/proc/cpuinfo cpu MHz"};
  return {0, ""};
}

CpuClock read_cpu_clock() {
  return cpu_clock_from(file_text("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"), file_text("/proc/cpuinfo"));
}

double nominal_flops_per_cycle(cpu::GemmIsa isa, const cpu::CpuModel& cpu) {
  switch (isa) {
    case cpu::GemmIsa::NoFma: return 8;       // one 4-lane multiply and one 4-lane add per cycle
    case cpu::GemmIsa::Avx2Fma: return 32;    // 2 FMA units x 8 lanes x 2
    case cpu::GemmIsa::Avx512Fma: return amd_before_zen5(cpu) ? 32 : 64;  // Zen 4: double-pumped
    case cpu::GemmIsa::Avx512Bf16: return amd_before_zen5(cpu) ? 64 : 128;  // 2x the AVX-512 FMA rate
    case cpu::GemmIsa::AmxBf16: return 1024;  // 16 x 16 x 32 x 2 FLOP per 16 cycles
  }
  return 0;
}

const char* gemm_isa_name(cpu::GemmIsa isa) {
  switch (isa) {
    case cpu::GemmIsa::NoFma: return "SSE (no FMA)";
    case cpu::GemmIsa::Avx2Fma: return "AVX2 FMA";
    case cpu::GemmIsa::Avx512Fma: return "AVX-512 FMA";
    case cpu::GemmIsa::Avx512Bf16: return "AVX512-BF16";
    case cpu::GemmIsa::AmxBf16: return "AMX-BF16";
  }
  return "?";
}

NominalPeak nominal_peak(cpu::GemmIsa isa, const cpu::CpuModel& cpu, int cores, const CpuClock& clock) {
  NominalPeak p;
  p.flops_per_cycle = nominal_flops_per_cycle(isa, cpu);
  p.cores = cores;
  p.clock = clock;
  p.isa = gemm_isa_name(isa);
  if (amd_zen5_or_later(cpu) && isa == cpu::GemmIsa::Avx512Fma) p.isa += " (Zen 5: 2 x 512-bit)";
  p.cpu = cpu.brand;
  if (clock.hz > 0)
    p.flops_per_second = p.flops_per_cycle * cores * clock.hz;
  else
    p.unknown_why = "no CPU clock in cpuinfo_max_freq or /proc/cpuinfo";
  return p;
}

NominalPeak nominal_peak(const Ops& ops, int cores) {
  if (ops.device() != Device::CPU) {
    NominalPeak p;
    p.unknown_why = "no table of GPU peaks; pass --peak_flops with the device's datasheet peak";
    return p;
  }
  const cpu::GemmIsa isa = ops.compute_dtype() == DType::BF16 ? cpu::bf16_gemm_isa() : cpu::fp32_gemm_isa();
  return nominal_peak(isa, cpu::cpu_model(), cores, read_cpu_clock());
}

std::string flops_text(double flops_per_second) {
  const double v = flops_per_second;
  char text[32];
  if (v >= 1e12)
    std::snprintf(text, sizeof text, "%.2f TFLOP/s", v / 1e12);
  else if (v >= 1e9)
    std::snprintf(text, sizeof text, "%.1f GFLOP/s", v / 1e9);
  else if (v >= 1e6)
    std::snprintf(text, sizeof text, "%.3g MFLOP/s", v / 1e6);
  else
    std::snprintf(text, sizeof text, "%.3g FLOP/s", v);
  return text;
}

std::string NominalPeak::describe() const {
  if (flops_per_second <= 0) return "nominal peak unknown (" + unknown_why + ")";
  char text[160];
  std::snprintf(text, sizeof text, "%s nominal (%s: %.0f FLOP/cycle x %d core%s x %.2f GHz, %s)",
                flops_text(flops_per_second).c_str(), isa.c_str(), flops_per_cycle, cores, cores == 1 ? "" : "s",
                clock.hz / 1e9, clock.source.c_str());
  return text;
}

}  // namespace trlhpc
