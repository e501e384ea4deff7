// Two native operators for the device acceptance run (bench/gpu/registry.yaml): audit_gpu::softsign, correct on
// every device, and its planted twin audit_gpu::softsign_drops_square, whose CUDA backward kernel (softsign.cu)
// forgets to square the derivative. Their CPU kernels, here, are shared and correct: the bug shows only on CUDA.
#include <torch/library.h>
#include <torch/autograd.h>
#include <ATen/ATen.h>

namespace {

at::Tensor softsign_cpu(const at::Tensor& x) { return x / (x.abs() + 1); }

// d/dx x / (1 + |x|) = 1 / (1 + |x|)^2
at::Tensor softsign_backward_cpu(const at::Tensor& grad, const at::Tensor& x) { return grad * (x.abs() + 1).pow(-2); }

// The schema names of one operator and of its backward, which the autograd formula below dispatches to.
struct Softsign {
  static constexpr const char* forward = "audit_gpu::softsign";
  static constexpr const char* backward = "audit_gpu::softsign_backward";
};
struct DropsSquare {
  static constexpr const char* forward = "audit_gpu::softsign_drops_square";
  static constexpr const char* backward = "audit_gpu::softsign_drops_square_backward";
};

template <typename Names>
class Formula : public torch::autograd::Function<Formula<Names>> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    at::AutoDispatchBelowADInplaceOrView guard;
    return c10::Dispatcher::singleton().findSchemaOrThrow(Names::forward, "")
        .template typed<at::Tensor(const at::Tensor&)>().call(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    return {c10::Dispatcher::singleton().findSchemaOrThrow(Names::backward, "")
                .template typed<at::Tensor(const at::Tensor&, const at::Tensor&)>().call(grads[0], x)};
  }
};

at::Tensor softsign_autograd(const at::Tensor& x) { return Formula<Softsign>::apply(x); }
at::Tensor drops_square_autograd(const at::Tensor& x) { return Formula<DropsSquare>::apply(x); }

}  // namespace

TORCH_LIBRARY(audit_gpu, m) {
  m.def("softsign(Tensor x) -> Tensor");
  m.def("softsign_backward(Tensor grad, Tensor x) -> Tensor");
  m.def("softsign_drops_square(Tensor x) -> Tensor");
  m.def("softsign_drops_square_backward(Tensor grad, Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(audit_gpu, CPU, m) {
  m.impl("softsign", &softsign_cpu);
  m.impl("softsign_backward", &softsign_backward_cpu);
  m.impl("softsign_drops_square", &softsign_cpu);
  m.impl("softsign_drops_square_backward", &softsign_backward_cpu);
}

TORCH_LIBRARY_IMPL(audit_gpu, Autograd, m) {
  m.impl("softsign", &softsign_autograd);
  m.impl("softsign_drops_square", &drops_square_autograd);
}
