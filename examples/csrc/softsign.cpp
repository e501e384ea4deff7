// softsign(x) = x / (1 + |x|): a native operator with a CPU kernel, a C++ autograd formula and a meta
// (fake) kernel, registered with TORCH_LIBRARY. Its CUDA kernel lives in softsign.cu, built where CUDA is.
#include <torch/library.h>
#include <torch/autograd.h>
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>

namespace {

at::Tensor softsign_cpu(const at::Tensor& x) {
  TORCH_CHECK(x.is_floating_point(), "softsign: expected a floating tensor, got ", x.scalar_type());
  at::Tensor input = x.contiguous();  // the kernel below walks memory in order
  at::Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "softsign_cpu", [&] {
    const scalar_t* in = input.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    using acc_t = at::opmath_type<scalar_t>;  // double stays double; half and bfloat16 compute in float
    for (int64_t i = 0; i < input.numel(); ++i) {
      const acc_t v = static_cast<acc_t>(in[i]);
      o[i] = static_cast<scalar_t>(v / (acc_t(1) + std::abs(v)));
    }
  });
  return out;
}

at::Tensor softsign_backward_cpu(const at::Tensor& grad, const at::Tensor& x) {
  // d/dx x / (1 + |x|) = 1 / (1 + |x|)^2, written with ATen ops so every dtype and layout works.
  at::Tensor d = (x.abs() + 1).pow(-2);
  return grad * d;
}

at::Tensor softsign_meta(const at::Tensor& x) { return at::empty_like(x, at::MemoryFormat::Contiguous); }

at::Tensor softsign_backward_meta(const at::Tensor& grad, const at::Tensor& x) {
  return at::empty_like(x, at::MemoryFormat::Contiguous);
}

class Softsign : public torch::autograd::Function<Softsign> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    at::AutoDispatchBelowADInplaceOrView guard;
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("examples_native::softsign", "")
                         .typed<at::Tensor(const at::Tensor&)>();
    return op.call(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("examples_native::softsign_backward", "")
                         .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
    return {op.call(grads[0], x)};
  }
};

at::Tensor softsign_autograd(const at::Tensor& x) { return Softsign::apply(x); }

}  // namespace

TORCH_LIBRARY(examples_native, m) {
  m.def("softsign(Tensor x) -> Tensor");
  m.def("softsign_backward(Tensor grad, Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(examples_native, CPU, m) {
  m.impl("softsign", &softsign_cpu);
  m.impl("softsign_backward", &softsign_backward_cpu);
}

TORCH_LIBRARY_IMPL(examples_native, Meta, m) {
  m.impl("softsign", &softsign_meta);
  m.impl("softsign_backward", &softsign_backward_meta);
}

TORCH_LIBRARY_IMPL(examples_native, Autograd, m) { m.impl("softsign", &softsign_autograd); }
