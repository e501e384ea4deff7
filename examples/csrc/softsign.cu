// The CUDA kernel of examples_native::softsign (built only where a CUDA toolchain and device exist).
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>

namespace {

template <typename scalar_t>
__global__ void softsign_kernel(const scalar_t* __restrict__ in, scalar_t* __restrict__ out, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t v = static_cast<acc_t>(in[i]);
    out[i] = static_cast<scalar_t>(v / (acc_t(1) + (v < acc_t(0) ? -v : v)));
  }
}

at::Tensor softsign_cuda(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "softsign_cuda: expected a CUDA tensor");
  at::Tensor input = x.contiguous();
  at::Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
  const int64_t n = input.numel();
  if (n == 0) return out;
  const int threads = 256;
  const int blocks = static_cast<int>((n + threads - 1) / threads);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "softsign_cuda", [&] {
    softsign_kernel<scalar_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        input.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor softsign_backward_cuda(const at::Tensor& grad, const at::Tensor& x) {
  return grad * (x.abs() + 1).pow(-2);
}

}  // namespace

TORCH_LIBRARY_IMPL(examples_native, CUDA, m) {
  m.impl("softsign", &softsign_cuda);
  m.impl("softsign_backward", &softsign_backward_cuda);
}
