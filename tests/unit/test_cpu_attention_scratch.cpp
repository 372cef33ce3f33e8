// cpu::attention_scratch_bytes, the memory plan's count of what the CPU attention kernels keep in the
// calling thread, against what a call really leaves held (attention_scratch_held_bytes). Each case
// runs in a fresh thread, whose scratch starts empty: a ring block (Tq != Tk, padded key tile), GQA
// with odd lengths, and a row long enough that the backward's dS store reaches its 64 MiB bound and
// goes through several slabs.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "trlhpc/kernels/cpu.hpp"

namespace {

struct Shape {
  int64_t B, Tq, Tk, NH, KVH, HS;
};

// Held bytes after one forward, and after the backward that follows it, in a new thread.
std::pair<int64_t, int64_t> held_after_calls(const Shape& s) {
  std::pair<int64_t, int64_t> held{-1, -1};
  std::thread worker([&] {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    auto random = [&](int64_t n) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = normal(rng);
      return v;
    };
    const std::vector<float> q = random(s.B * s.Tq * s.NH * s.HS), k = random(s.B * s.Tk * s.KVH * s.HS),
                             v = random(s.B * s.Tk * s.KVH * s.HS), dout = random(s.B * s.Tq * s.NH * s.HS);
    std::vector<int32_t> q_pos(static_cast<size_t>(s.B * s.Tq)), k_pos(static_cast<size_t>(s.B * s.Tk));
    for (int64_t i = 0; i < s.B * s.Tq; ++i) q_pos[static_cast<size_t>(i)] = static_cast<int32_t>(s.Tk - s.Tq + i % s.Tq);
    for (int64_t j = 0; j < s.B * s.Tk; ++j) k_pos[static_cast<size_t>(j)] = static_cast<int32_t>(j % s.Tk);
    const std::vector<int32_t> q_doc(q_pos.size(), 0), k_doc(k_pos.size(), 0);
    std::vector<float> o(q.size()), lse(static_cast<size_t>(s.B * s.NH * s.Tq));
    std::vector<float> dq(q.size(), 0.0f), dk(k.size(), 0.0f), dv(v.size(), 0.0f);
    const float scale = 0.125f;
    trlhpc::cpu::attention_fwd(q.data(), k.data(), v.data(), q_pos.data(), k_pos.data(), q_doc.data(), k_doc.data(),
                               o.data(), lse.data(), s.B, s.Tq, s.Tk, s.NH, s.KVH, s.HS, scale);
    held.first = trlhpc::cpu::attention_scratch_held_bytes();
    trlhpc::cpu::attention_bwd(q.data(), k.data(), v.data(), o.data(), lse.data(), dout.data(), q_pos.data(),
                               k_pos.data(), q_doc.data(), k_doc.data(), dq.data(), dk.data(), dv.data(), s.B, s.Tq,
                               s.Tk, s.NH, s.KVH, s.HS, scale);
    held.second = trlhpc::cpu::attention_scratch_held_bytes();
  });
  worker.join();
  return held;
}

TEST(CpuAttentionScratch, PlanCountsWhatTheCallsHold) {
  for (const Shape& s : {Shape{1, 96, 200, 4, 2, 32}, Shape{2, 130, 130, 6, 3, 16}, Shape{1, 4096, 4096, 8, 2, 32}}) {
    SCOPED_TRACE("B " + std::to_string(s.B) + " Tq " + std::to_string(s.Tq) + " Tk " + std::to_string(s.Tk));
    const auto [forward, backward] = held_after_calls(s);
    EXPECT_EQ(forward, trlhpc::cpu::attention_scratch_bytes(s.B, s.Tq, s.Tk, s.NH, s.KVH, s.HS, false));
    EXPECT_EQ(backward, trlhpc::cpu::attention_scratch_bytes(s.B, s.Tq, s.Tk, s.NH, s.KVH, s.HS, true));
  }
  // The 4096-token case: its dS store alone would be 64 q tiles x 8 heads x 64 key tiles x 16 KiB =
  // 512 MiB unbounded; bounded, the scratch is 64 MiB of it + 4 MiB repacked K/V + 8 MiB of q/dout
  // copies + 0.1 MiB delta.
  EXPECT_LT(trlhpc::cpu::attention_scratch_bytes(1, 4096, 4096, 8, 2, 32, true), int64_t{81} << 20);
  EXPECT_EQ(trlhpc::cpu::attention_scratch_bytes(0, 4096, 4096, 8, 2, 32, true), 0);
}

}  // namespace
