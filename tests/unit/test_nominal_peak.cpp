// ops/nominal_peak.hpp: the nominal peak table (ISA x vendor/family -> FLOP/cycle per core) and the
// clock it is multiplied by. Expected values are hand products of the table's entries.
#include <gtest/gtest.h>

#include "trlhpc/ops/nominal_peak.hpp"

namespace trlhpc {
namespace {

using cpu::CpuModel;
using cpu::CpuVendor;
using cpu::GemmIsa;

const CpuModel kXeon{CpuVendor::Intel, 6, 143, "Intel(R) Xeon(R) Platinum 8480+"};  // Sapphire Rapids
const CpuModel kZen4{CpuVendor::Amd, 0x19, 0x11, "AMD EPYC 9654"};
const CpuModel kZen5{CpuVendor::Amd, 0x1A, 0x02, "AMD EPYC 9755"};

double peak(GemmIsa isa, const CpuModel& cpu, int cores, double hz) {
  return nominal_peak(isa, cpu, cores, CpuClock{hz, "test"}).flops_per_second;
}

TEST(NominalPeak, TableTimesCoresTimesClock) {
  // Intel AVX-512: 2 FMA units x 16 lanes x 2 = 64 FLOP/cycle; 1 core at 2.6 GHz: 166.4 GFLOP/s.
  EXPECT_DOUBLE_EQ(peak(GemmIsa::Avx512Fma, kXeon, 1, 2.6e9), 166.4e9);
  // AMX-BF16: 16 x 16 x 32 x 2 / 16 = 1024 FLOP/cycle; 2 cores at 2.0 GHz: 4.096 TFLOP/s.
  EXPECT_DOUBLE_EQ(peak(GemmIsa::AmxBf16, kXeon, 2, 2.0e9), 4.096e12);
  // AVX512-BF16 on Intel: 2 x 64 = 128; 4 cores at 3 GHz: 1.536 TFLOP/s.
  EXPECT_DOUBLE_EQ(peak(GemmIsa::Avx512Bf16, kXeon, 4, 3.0e9), 1.536e12);
  // AVX2: 2 x 8 x 2 = 32; 4 cores at 3.5 GHz: 448 GFLOP/s. No FMA: 4 + 4 = 8; 1 core at 2 GHz: 16 GFLOP/s.
  EXPECT_DOUBLE_EQ(peak(GemmIsa::Avx2Fma, kXeon, 4, 3.5e9), 448e9);
  EXPECT_DOUBLE_EQ(peak(GemmIsa::NoFma, kXeon, 1, 2.0e9), 16e9);
  // Zen 4 double-pumps 512-bit FMAs through 2 x 256-bit units: 32; 8 cores at 3 GHz: 768 GFLOP/s; its
  // VDPBF16PS 64: 1.536 TFLOP/s. Zen 5 has 2 x 512-bit: 64; 16 cores at 2.5 GHz: 2.56 TFLOP/s.
  EXPECT_DOUBLE_EQ(peak(GemmIsa::Avx512Fma, kZen4, 8, 3.0e9), 768e9);
  EXPECT_DOUBLE_EQ(peak(GemmIsa::Avx512Bf16, kZen4, 8, 3.0e9), 1.536e12);
  EXPECT_DOUBLE_EQ(peak(GemmIsa::Avx512Fma, kZen5, 16, 2.5e9), 2.56e12);
  EXPECT_DOUBLE_EQ(peak(GemmIsa::Avx2Fma, kZen4, 1, 1.0e9), 32e9);
}

TEST(NominalPeak, DescribesHowItWasReckoned) {
  const NominalPeak p = nominal_peak(GemmIsa::Avx512Fma, kXeon, 1, CpuClock{2.6e9, "/proc/cpuinfo cpu MHz"});
  EXPECT_EQ(p.describe(), "166.4 GFLOP/s nominal (AVX-512 FMA: 64 FLOP/cycle x 1 core x 2.60 GHz, /proc/cpuinfo cpu MHz)");
  const NominalPeak unknown = nominal_peak(GemmIsa::Avx512Fma, kXeon, 1, CpuClock{});
  EXPECT_EQ(unknown.flops_per_second, 0);
  EXPECT_NE(unknown.describe().find("unknown"), std::string::npos) << unknown.describe();
}

TEST(NominalPeak, ClockFromCpufreqElseTheFastestCpuMhz) {
  // cpuinfo_max_freq is in kHz: 3500000 -> 3.5 GHz; it wins over /proc/cpuinfo.
  const CpuClock sysfs = cpu_clock_from("3500000\n", "cpu MHz\t\t: 2600.000\n");
  EXPECT_DOUBLE_EQ(sysfs.hz, 3.5e9);
  EXPECT_EQ(sysfs.source, "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  // Without it, the largest "cpu MHz" line: 2900.5 MHz.
  const CpuClock proc = cpu_clock_from("", "processor\t: 0\ncpu MHz\t\t: 2600.000\nprocessor\t: 1\ncpu MHz\t\t: 2900.500\n");
  EXPECT_DOUBLE_EQ(proc.hz, 2.9005e9);
  EXPECT_EQ(proc.source, "/proc/cpuinfo cpu MHz");
  EXPECT_EQ(cpu_clock_from("", "processor\t: 0\n").hz, 0);
}

TEST(NominalPeak, FlopsText) {
  EXPECT_EQ(flops_text(166.4e9), "166.4 GFLOP/s");
  EXPECT_EQ(flops_text(4.096e12), "4.10 TFLOP/s");
  EXPECT_EQ(flops_text(1e12), "1.00 TFLOP/s");
  EXPECT_EQ(flops_text(1), "1 FLOP/s");  // --peak_flops 1 (test_reliability)
}

}  // namespace
}  // namespace trlhpc
