#include "trlhpc/model/neftune.hpp"

#include <cmath>

#include "trlhpc/core/splitmix64.hpp"
#include "trlhpc/model/init.hpp"

namespace trlhpc {

float neftune_magnitude(double alpha, int64_t L, int64_t d) {
  const float root = std::sqrt(static_cast<float>(L * d));
  return static_cast<float>(alpha) / root;
}

uint64_t neftune_key(uint64_t seed, int64_t step) {
  return splitmix64(init_stream_key("neftune", seed) ^ splitmix64(static_cast<uint64_t>(step)));
}

}  // namespace trlhpc
