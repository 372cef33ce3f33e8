// The CUDA implementation of Ops, part 1: construction, memory, dense and elementwise ops, the factories.
// Part 2 (the model's layer ops) is cuda_ops_layers.cu, part 3 (casts, AdamW)
// cuda_ops_precision.cu. See include/trlhpc/ops/cuda_ops.hpp.
#include <cstring>
#include <string>

#include "attention.cuh"
#include "device_query.cuh"
#include "elementwise.cuh"
#include "cuda_ops_impl.cuh"
#include "trlhpc/core/cuda_check.hpp"

namespace trlhpc {
namespace cuda_backend {

void expect_cuda(const Tensor& t, const char* what) {
  TRLHPC_ASSERT(t.numel() == 0 || (t.device() == Device::CUDA && t.data() != nullptr),
                std::string(what) + ": expected a CUDA tensor, got a " + device_name(t.device()) + " tensor " +
                    shape_string(t.shape()));
}

void expect_dtype(const Tensor& t, DType dtype, const char* what) {
  TRLHPC_ASSERT(t.dtype() == dtype, std::string(what) + ": expected " + dtype_name(dtype) + ", got " +
                                        dtype_name(t.dtype()) + " " + shape_string(t.shape()));
}

void expect_numel(const Tensor& t, int64_t numel, const char* what) {
  TRLHPC_ASSERT(t.numel() == numel, std::string(what) + ": expected " + std::to_string(numel) + " elements, got " +
                                        shape_string(t.shape()));
}

namespace {

cudaDataType_t cuda_type(DType d, const char* what) {
  if (d == DType::F32) return CUDA_R_32F;
  if (d == DType::BF16) return CUDA_R_16BF;
  throw_runtime_failure("trlhpc", what, std::string("unsupported dtype ") + dtype_name(d), __FILE__, __LINE__);
}

}  // namespace

CudaOpsImpl::CudaOpsImpl(int device, const CudaOpsOptions& options)
    : CudaOps(options.compute_dtype),
      device_(device),
      options_(options),
      allocator_([device] {
        const int count = cuda::visible_device_count();
        if (device < 0 || device >= count)
          throw RuntimeFailure(rank_prefix() + "CUDA device " + std::to_string(device) + " requested but " +
                               std::to_string(count) + " visible (" + cuda::runtime_version_string() +
                               "); use --device cpu or check CUDA_VISIBLE_DEVICES");
        TRLHPC_CHECK_CUDA(cudaSetDevice(device));
        return std::make_shared<cuda::DeviceAllocator>(device);
      }()),
      timer_(options.time_ops) {
  TRLHPC_REQUIRE(options.compute_dtype == DType::F32 || options.compute_dtype == DType::BF16,
                 std::string("CUDA backend: compute dtype must be F32 or BF16, got ") + dtype_name(options.compute_dtype));
  smem_limits_ = cuda::device_smem_limits(device);
  int major = 0;
  TRLHPC_CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  TRLHPC_REQUIRE(major >= 8 || options.compute_dtype == DType::F32,
                 "bf16 compute needs a GPU of compute capability 8.0 or newer (Ampere, Hopper); " +
                     cuda::device_name(device) + " is " + std::to_string(major) + ".x: train in fp32");
  matmul_ = std::make_unique<cuda::Matmul>(*allocator_, options.matmul_workspace_bytes, options.allow_tf32);
  host_value_ = cuda::DeviceBuffer<double>(*allocator_, 1);
}

CudaOpsImpl::~CudaOpsImpl() { cudaStreamSynchronize(stream_.get()); }  // errors ignored: may run during unwinding

// ---- memory ---------------------------------------------------------------------------------------------

Tensor CudaOpsImpl::allocate(const Shape& shape, DType dtype) {
  for (int64_t d : shape) TRLHPC_ASSERT(d >= 0, "negative dimension in " + shape_string(shape));
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  void* block = allocator_->allocate(bytes);
  std::shared_ptr<void> storage(block, [allocator = allocator_](void* p) { allocator->release(p); });
  return Tensor(std::move(storage), block, dtype, Device::CUDA, shape);
}

Tensor CudaOpsImpl::zeros(const Shape& shape, DType dtype) {
  Tensor t = allocate(shape, dtype);
  fill_zero(t);
  return t;
}

void CudaOpsImpl::fill_zero(const Tensor& t) {
  expect_cuda(t, "fill_zero");
  const auto timing = timed("fill_zero");
  if (t.nbytes()) TRLHPC_CHECK_CUDA(cudaMemsetAsync(t.data(), 0, t.nbytes(), stream()));
}

void CudaOpsImpl::copy(const Tensor& dst, const Tensor& src) {
  TRLHPC_ASSERT(dst.nbytes() == src.nbytes(), "copy of " + shape_string(src.shape()) + " into " + shape_string(dst.shape()));
  expect_cuda(dst, "copy dst");
  expect_cuda(src, "copy src");
  const auto timing = timed("copy");
  if (dst.nbytes())
    TRLHPC_CHECK_CUDA(cudaMemcpyAsync(dst.data(), src.data(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream()));
}

void CudaOpsImpl::copy_from_host(const Tensor& dst, const void* host, size_t bytes) {
  TRLHPC_ASSERT(bytes <= dst.nbytes(), "copy_from_host overflows the tensor");
  if (!bytes) return;
  if (dst.device() == Device::CPU) {  // an offloaded host tensor (allocate_host): queued copies may use it
    stream_.synchronize();
    std::memcpy(dst.data(), host, bytes);
    return;
  }
  expect_cuda(dst, "copy_from_host");
  // Synchronous for the caller: `host` may be reused or freed as soon as this returns.
  TRLHPC_CHECK_CUDA(cudaMemcpyAsync(dst.data(), host, bytes, cudaMemcpyHostToDevice, stream()));
  stream_.synchronize();
}

void CudaOpsImpl::copy_to_host(void* host, const Tensor& src, size_t bytes) {
  TRLHPC_ASSERT(bytes <= src.nbytes(), "copy_to_host reads past the tensor");
  if (!bytes) return;
  if (src.device() == Device::CPU) {  // an offloaded host tensor: wait for queued copies into it
    stream_.synchronize();
    std::memcpy(host, src.data(), bytes);
    return;
  }
  expect_cuda(src, "copy_to_host");
  TRLHPC_CHECK_CUDA(cudaMemcpyAsync(host, src.data(), bytes, cudaMemcpyDeviceToHost, stream()));
  stream_.synchronize();
}

// Page-locked host memory for CPU offload: cudaMemcpyAsync from and to it is truly asynchronous (from
// pageable memory the driver stages it and the copy blocks the host).
Tensor CudaOpsImpl::allocate_host(const Shape& shape, DType dtype) {
  for (int64_t d : shape) TRLHPC_ASSERT(d >= 0, "negative dimension in " + shape_string(shape));
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  void* memory = nullptr;
  if (bytes) {
    TRLHPC_CHECK_CUDA(cudaMallocHost(&memory, bytes));
    std::memset(memory, 0, bytes);
  }
  std::shared_ptr<void> storage(memory, [](void* p) {
    if (p) cudaFreeHost(p);  // errors ignored: may run during unwinding
  });
  return Tensor(std::move(storage), memory, dtype, Device::CPU, shape);
}

void CudaOpsImpl::copy_to_host_async(const Tensor& host_dst, const Tensor& src) {
  TRLHPC_ASSERT(host_dst.nbytes() == src.nbytes() && host_dst.device() == Device::CPU,
                "copy_to_host_async: " + shape_string(src.shape()) + " into a host tensor " +
                    shape_string(host_dst.shape()) + " of another size or device");
  expect_cuda(src, "copy_to_host_async src");
  if (src.nbytes())
    TRLHPC_CHECK_CUDA(cudaMemcpyAsync(host_dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToHost, stream()));
}

void CudaOpsImpl::copy_from_host_async(const Tensor& dst, const Tensor& host_src) {
  TRLHPC_ASSERT(host_src.nbytes() == dst.nbytes() && host_src.device() == Device::CPU,
                "copy_from_host_async: a host tensor " + shape_string(host_src.shape()) + " into " +
                    shape_string(dst.shape()) + " of another size or device");
  expect_cuda(dst, "copy_from_host_async dst");
  if (dst.nbytes())
    TRLHPC_CHECK_CUDA(cudaMemcpyAsync(dst.data(), host_src.data(), dst.nbytes(), cudaMemcpyHostToDevice, stream()));
}

// ---- dense ------------------------------------------------------------------------------------------------

void CudaOpsImpl::matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, float alpha,
                         float beta) {
  TRLHPC_ASSERT(a.rank() == 2 && b.rank() == 2 && c.rank() == 2, "matmul takes 2-D tensors");
  const int64_t M = trans_a ? a.dim(1) : a.dim(0), K = trans_a ? a.dim(0) : a.dim(1);
  const int64_t Kb = trans_b ? b.dim(1) : b.dim(0), N = trans_b ? b.dim(0) : b.dim(1);
  TRLHPC_ASSERT(K == Kb && c.dim(0) == M && c.dim(1) == N,
                "matmul shapes " + shape_string(a.shape()) + (trans_a ? "^T" : "") + " x " + shape_string(b.shape()) +
                    (trans_b ? "^T" : "") + " -> " + shape_string(c.shape()));
  expect_cuda(a, "matmul a");
  expect_cuda(b, "matmul b");
  expect_cuda(c, "matmul c");
  // Under a BF16 compute dtype an F32 operand (a master weight, dq/dk/dv, the dlogits) is rounded to bf16
  // first, as the CPU GEMM rounds it while packing (Ops::compute_dtype): every GEMM of the recipe then
  // multiplies bf16 operands with fp32 accumulation, on either backend. The scratch copies are freed to
  // the allocator right after the launch: later work on this one stream cannot overtake the GEMM.
  const Tensor a_op = bf16_operand(a), b_op = bf16_operand(b);
  TRLHPC_ASSERT(a_op.dtype() == b_op.dtype(), std::string("matmul operands must share a dtype, got ") +
                                                  dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()));
  // cuBLAS has no fp32 x fp32 -> bf16 GEMM (docs/CUDA-REVIEW-FIXES.md defect 4): refuse it here, before any work is
  // queued, rather than fail inside cuBLASLt. Under a BF16 compute dtype bf16_operand has already made
  // fp32 operands (the decoder's dlogits times a bf16 weight) bf16, so only an fp32 recipe can meet this.
  TRLHPC_ASSERT(!(a_op.dtype() == DType::F32 && c.dtype() == DType::BF16),
                "matmul: fp32 operands " + shape_string(a.shape()) + " x " + shape_string(b.shape()) +
                    " into a bf16 output: no cuBLAS GEMM does this; use an F32 output and cast, or bf16 operands");
  const auto timing = timed("matmul");
  matmul_->run(a_op.data(), trans_a, b_op.data(), trans_b, c.data(), cuda_type(a_op.dtype(), "matmul a"),
               cuda_type(c.dtype(), "matmul c"), M, N, K, alpha, beta, stream());
}

Tensor CudaOpsImpl::bf16_operand(const Tensor& t) {
  if (compute_dtype() != DType::BF16 || t.dtype() != DType::F32) return t;
  Tensor rounded = allocate(t.shape(), DType::BF16);
  cast(rounded, t);
  return rounded;
}

Tensor CudaOpsImpl::f32_vector(const Tensor& t, const char* op) {
  if (t.dtype() == DType::F32) return t;
  expect_dtype(t, DType::BF16, op);
  Tensor wide = allocate(t.shape(), DType::F32);
  cast(wide, t);
  return wide;
}

void CudaOpsImpl::bias_add(const Tensor& y, const Tensor& bias_in) {
  const Tensor bias = f32_vector(bias_in, "bias_add bias");
  expect_cuda(y, "bias_add y");
  TRLHPC_ASSERT(bias.numel() > 0 && y.numel() % bias.numel() == 0, "bias_add: bias does not divide y");
  const auto timing = timed("bias_add");
  with_float_type(y.dtype(), "bias_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::bias_add(data_of<T>(y), data_of<float>(bias), y.numel() / bias.numel(), bias.numel(), stream());
  });
}

void CudaOpsImpl::bias_bwd(const Tensor& dy, const Tensor& dbias) {
  expect_dtype(dbias, DType::F32, "bias_bwd dbias");
  expect_cuda(dy, "bias_bwd dy");
  TRLHPC_ASSERT(dbias.numel() > 0 && dy.numel() % dbias.numel() == 0, "bias_bwd: dbias does not divide dy");
  const auto timing = timed("bias_bwd");
  with_float_type(dy.dtype(), "bias_bwd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::bias_bwd(data_of<T>(dy), data_of<float>(dbias), dy.numel() / dbias.numel(), dbias.numel(), *allocator_,
                   stream());
  });
}

void CudaOpsImpl::add_inplace(const Tensor& y, const Tensor& x) {
  TRLHPC_ASSERT(y.numel() == x.numel(), "add_inplace size mismatch");
  expect_cuda(y, "add_inplace y");
  expect_cuda(x, "add_inplace x");
  const auto timing = timed("add_inplace");
  if (y.dtype() == DType::F32 && x.dtype() == DType::F32)
    cuda::add_inplace(data_of<float>(y), data_of<float>(x), y.numel(), stream());
  else if (y.dtype() == DType::BF16 && x.dtype() == DType::BF16)
    cuda::add_inplace(data_of<bf16>(y), data_of<bf16>(x), y.numel(), stream());
  else if (y.dtype() == DType::F32 && x.dtype() == DType::BF16)
    cuda::add_inplace(data_of<float>(y), data_of<bf16>(x), y.numel(), stream());
  else
    TRLHPC_ASSERT(false, std::string("add_inplace: unsupported dtypes y ") + dtype_name(y.dtype()) + ", x " +
                             dtype_name(x.dtype()));
}

void CudaOpsImpl::scale_inplace(const Tensor& y, float s) {
  expect_cuda(y, "scale_inplace");
  const auto timing = timed("scale_inplace");
  with_float_type(y.dtype(), "scale_inplace", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::scale_inplace(data_of<T>(y), s, y.numel(), stream());
  });
}

double CudaOpsImpl::sum_of_squares(const Tensor& x) {
  expect_cuda(x, "sum_of_squares");
  if (x.numel() == 0) return 0.0;
  double result = 0.0;
  {
    const auto timing = timed("sum_of_squares");
    with_float_type(x.dtype(), "sum_of_squares", [&](auto tag) {
      using T = typename decltype(tag)::type;
      cuda::sum_of_squares(data_of<T>(x), x.numel(), host_value_.get(), *allocator_, stream());
    });
    TRLHPC_CHECK_CUDA(cudaMemcpyAsync(&result, host_value_.get(), sizeof(double), cudaMemcpyDeviceToHost, stream()));
  }
  stream_.synchronize();
  return result;
}

}  // namespace cuda_backend

std::unique_ptr<CudaOps> make_cuda_backend(int device, const CudaOpsOptions& options) {
  return std::make_unique<cuda_backend::CudaOpsImpl>(device, options);
}

CudaOps* as_cuda_ops(Ops& ops) { return dynamic_cast<CudaOps*>(&ops); }

}  // namespace trlhpc
