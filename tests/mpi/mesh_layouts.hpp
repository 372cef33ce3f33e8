#pragma once
// Every way to factor a world size into (dp_replicate, dp_shard, cp, sp, tp), for the mesh and
// process-group tests. Includes cp > 1 together with sp > 1: the mesh math is defined for it even
// though ParallelDims::resolved rejects it for now.
#include <vector>

#include "trlhpc/parallel/mesh/parallel_dims.hpp"

namespace trlhpc::testing {

inline std::vector<ParallelDims> all_layouts(int world_size) {
  std::vector<ParallelDims> layouts;
  auto divisors = [](int n) {
    std::vector<int> d;
    for (int i = 1; i <= n; ++i)
      if (n % i == 0) d.push_back(i);
    return d;
  };
  for (int dpr : divisors(world_size))
    for (int dps : divisors(world_size / dpr))
      for (int cp : divisors(world_size / dpr / dps))
        for (int sp : divisors(world_size / dpr / dps / cp))
          layouts.push_back(ParallelDims{dpr, dps, cp, sp, world_size / dpr / dps / cp / sp});
  return layouts;
}

}  // namespace trlhpc::testing
