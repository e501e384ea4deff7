// The CUDA kernels of audit_gpu::softsign and its planted twin (built only where a CUDA toolchain and device
// exist). Both backward operators launch the same kernel; the twin's passes squared = false: the bug.
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

namespace {

template <typename scalar_t>
__global__ void softsign_backward_kernel(const scalar_t* __restrict__ grad, const scalar_t* __restrict__ x,
                                         scalar_t* __restrict__ out, int64_t n, bool squared) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t v = static_cast<acc_t>(x[i]);
    const acc_t d = acc_t(1) / (acc_t(1) + (v < acc_t(0) ? -v : v));
    out[i] = static_cast<scalar_t>(static_cast<acc_t>(grad[i]) * (squared ? d * d : d));
  }
}

at::Tensor softsign_cuda(const at::Tensor& x) { return x / (x.abs() + 1); }

at::Tensor backward_cuda(const at::Tensor& grad, const at::Tensor& x, bool squared) {
  TORCH_CHECK(x.is_cuda() && grad.is_cuda(), "softsign backward: expected CUDA tensors");
  const at::Tensor g = grad.expand_as(x).contiguous(), input = x.contiguous();
  at::Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
  const int64_t n = input.numel();
  if (n == 0) return out;
  const int threads = 256;
  const int blocks = static_cast<int>((n + threads - 1) / threads);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "softsign_backward_cuda", [&] {
    softsign_backward_kernel<scalar_t><<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        g.data_ptr<scalar_t>(), input.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n, squared);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor softsign_backward_cuda(const at::Tensor& grad, const at::Tensor& x) { return backward_cuda(grad, x, true); }

at::Tensor drops_square_backward_cuda(const at::Tensor& grad, const at::Tensor& x) {
  return backward_cuda(grad, x, false);
}

}  // namespace

TORCH_LIBRARY_IMPL(audit_gpu, CUDA, m) {
  m.impl("softsign", &softsign_cuda);
  m.impl("softsign_backward", &softsign_backward_cuda);
  m.impl("softsign_drops_square", &softsign_cuda);
  m.impl("softsign_drops_square_backward", &drops_square_backward_cuda);
}
