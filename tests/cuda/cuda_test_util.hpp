#pragma once
// Helpers of the CUDA tests (tests/cuda/test_*.cpp): every CUDA op is compared with the CPU op on the
// same fresh random inputs. bf16 paths get inputs rounded to bf16 first, so the CPU reference (fp32)
// sees exactly the values the GPU reads; their outputs must agree to a normalised error
//   ||got - want|| / ||want|| <= 1e-2 (bf16 storage) or <= 1e-5 (fp32 paths).
// Outputs that the op overwrites are poisoned (all bits set: NaN in fp32 and bf16) before the call, so
// an element the kernel forgets to write fails the comparison.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "device_query.cuh"
#include "test_support.hpp"
#include "trlhpc/core/dtype.hpp"
#include "trlhpc/kernels/elementwise_math.hpp"
#include "trlhpc/ops/cuda_ops.hpp"
#include "trlhpc/ops/ops.hpp"

// Skips the test, printing why, on a machine without a usable GPU.
#define TRLHPC_REQUIRE_GPU()                                                                        \
  do {                                                                                              \
    if (::trlhpc::cuda::visible_device_count() == 0) {                                              \
      GTEST_SKIP() << "no CUDA device visible (" << ::trlhpc::cuda::runtime_version_string()        \
                   << "): the CUDA tests need a GPU and its driver";                                \
    }                                                                                               \
  } while (0)

namespace trlhpc::cuda_test {

inline constexpr double kF32Tolerance = 1e-5;
inline constexpr double kBf16Tolerance = 1e-2;

inline double tolerance(DType dtype) { return dtype == DType::BF16 ? kBf16Tolerance : kF32Tolerance; }

inline std::vector<float> round_bf16(std::vector<float> v) {
  for (float& x : v) x = math::round_to_bf16(x);
  return v;
}

// Host values into a new device tensor of `dtype` (F32 or BF16: converted on the host).
inline Tensor upload(Ops& ops, const std::vector<float>& values, const Shape& shape, DType dtype = DType::F32) {
  Tensor t = ops.allocate(shape, dtype);
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  if (dtype == DType::F32) {
    ops.copy_from_host(t, values.data(), values.size() * sizeof(float));
  } else {
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = math::bf16_bits_from_float(values[i]);
    ops.copy_from_host(t, bits.data(), bits.size() * sizeof(uint16_t));
  }
  return t;
}

inline Tensor upload_i32(Ops& ops, const std::vector<int32_t>& values, const Shape& shape) {
  Tensor t = ops.allocate(shape, DType::I32);
  ops.copy_from_host(t, values.data(), values.size() * sizeof(int32_t));
  return t;
}

// A tensor whose every byte is 0xFF (NaN in F32 and BF16).
inline Tensor poisoned(Ops& ops, const Shape& shape, DType dtype = DType::F32) {
  Tensor t = ops.allocate(shape, dtype);
  std::vector<unsigned char> bytes(t.nbytes(), 0xFF);
  ops.copy_from_host(t, bytes.data(), bytes.size());
  return t;
}

// Device (or host) tensor values as floats.
inline std::vector<float> download(Ops& ops, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::F32) {
    ops.copy_to_host(out.data(), t, t.nbytes());
  } else if (t.dtype() == DType::BF16) {
    std::vector<uint16_t> bits(out.size());
    ops.copy_to_host(bits.data(), t, t.nbytes());
    for (size_t i = 0; i < out.size(); ++i) out[i] = math::float_from_bf16_bits(bits[i]);
  } else {
    ADD_FAILURE() << "download: unsupported dtype " << dtype_name(t.dtype());
  }
  return out;
}

// Normalised error of got against want; fails on non-finite values and names the worst element.
inline ::testing::AssertionResult close_normalized(const std::vector<float>& got, const std::vector<float>& want,
                                                   double tol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  double num = 0, den = 0, worst = -1;
  size_t worst_i = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isfinite(want[i]) != std::isfinite(got[i]) || (std::isnan(want[i]) != std::isnan(got[i])))
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want " << want[i];
    if (!std::isfinite(want[i])) continue;  // equal infinities (e.g. lse = -inf of an empty row)
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
    if (std::fabs(d) > worst) worst = std::fabs(d), worst_i = i;
  }
  const double err = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
  if (err <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "normalised error " << err << " > " << tol << "; worst element "
                                       << worst_i << ": got " << got[worst_i] << ", want " << want[worst_i];
}

// The backends under test.
struct Backends {
  std::unique_ptr<Ops> cpu = make_cpu_ops();
  std::unique_ptr<CudaOps> gpu = make_cuda_backend(0);
};

// A value uploaded to both backends (the GPU copy in `dtype`, the CPU copy in fp32 of the same values).
struct Pair {
  Tensor cpu, gpu;
};
inline Pair both(Backends& be, const std::vector<float>& values, const Shape& shape, DType dtype = DType::F32) {
  const std::vector<float> v = dtype == DType::BF16 ? round_bf16(values) : values;
  return Pair{upload(*be.cpu, v, shape), upload(*be.gpu, v, shape, dtype)};
}
inline Pair both_i32(Backends& be, const std::vector<int32_t>& values, const Shape& shape) {
  return Pair{upload_i32(*be.cpu, values, shape), upload_i32(*be.gpu, values, shape)};
}
inline Pair both_poisoned(Backends& be, const Shape& shape, DType dtype = DType::F32) {
  return Pair{poisoned(*be.cpu, shape), poisoned(*be.gpu, shape, dtype)};
}

// GPU result of a pair against its CPU result.
inline ::testing::AssertionResult matches(Backends& be, const Pair& p, double tol) {
  return close_normalized(download(*be.gpu, p.gpu), download(*be.cpu, p.cpu), tol);
}

}  // namespace trlhpc::cuda_test
