// cpu_model(): vendor, family and brand string from CPUID (Intel SDM vol. 2A, "CPUID"; AMD APM vol. 3,
// "CPUID Fn0000_0001_EAX"): display family = base family (bits 8-11), plus the extended family (bits
// 20-27) when the base is 0xF; display model = base model (bits 4-7), plus the extended model (bits
// 16-19) << 4 when the base family is 6 or 0xF.
#include <cstring>
#include <string>

#include "kernels/cpu/cpuid.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {
namespace {

std::string vendor_string() {
  const CpuidRegisters r = cpuid(0);
  char text[13] = {};
  std::memcpy(text, &r.ebx, 4);  // "Genu" "ineI" "ntel": ebx, edx, ecx
  std::memcpy(text + 4, &r.edx, 4);
  std::memcpy(text + 8, &r.ecx, 4);
  return text;
}

std::string brand_string() {
  if (cpuid(0x80000000u).eax < 0x80000004u) return "";
  char text[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    const CpuidRegisters r = cpuid(0x80000002u + i);
    std::memcpy(text + 16 * i, &r, 16);  // eax, ebx, ecx, edx in that order
  }
  std::string brand = text;
  const size_t first = brand.find_first_not_of(' '), last = brand.find_last_not_of(' ');
  return first == std::string::npos ? "" : brand.substr(first, last - first + 1);
}

}  // namespace

CpuModel cpu_model() {
  CpuModel m;
  const std::string vendor = vendor_string();
  // Hygon's Dhyana is a licensed Zen 1: AMD's table applies.
  m.vendor = vendor == "GenuineIntel" ? CpuVendor::Intel
             : vendor == "AuthenticAMD" || vendor == "HygonGenuine" ? CpuVendor::Amd
                                                                     : CpuVendor::Other;
  const unsigned eax = cpuid(1).eax;
  const int base_family = static_cast<int>((eax >> 8) & 0xFu), base_model = static_cast<int>((eax >> 4) & 0xFu);
  m.family = base_family == 0xF ? base_family + static_cast<int>((eax >> 20) & 0xFFu) : base_family;
  m.model = base_family == 6 || base_family == 0xF ? base_model + (static_cast<int>((eax >> 16) & 0xFu) << 4) : base_model;
  m.brand = brand_string();
  return m;
}

}  // namespace trlhpc::cpu
