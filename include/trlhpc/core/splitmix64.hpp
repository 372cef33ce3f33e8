#pragma once
// splitmix64 (Steele, Lea, Flood 2014; Vigna's reference constants): one step of the generator, used as
// a 64-bit mixing function (seeds of the parameter initialiser, the final avalanche of the dataset cache
// key and the dataset fingerprint).
#include <cstdint>

namespace trlhpc {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace trlhpc
