"""Every built-in check's declaration, apart from its code: the table ``audit list``, the plan and the
reports read without importing torch. A check's module adds only its code (``run``, ``replay``, ``model_replay``,
``replay_helpers``, ``script_values``) with :func:`declared`; its contract, claims, dtypes and drawing options live
here.
"""

from __future__ import annotations

from dataclasses import replace

from audit.catalog.interface import OPERATOR_KINDS, Check, claimed_dtypes
from audit.core.contract import COMPLEX_DTYPES, LOW_PRECISION_DTYPES
from audit.core.errors import InternalError
from audit.registry.model import Entry, EntryKind


#: shared_grad draws batches this large and up: at 1 the mean of per-sample gradients is their sum.
MIN_BATCH = 2
#: The likely fix of a gradient that is not the declared proxy's or VJP's (the kit's ``INTENDED`` kind): never
#: "derive it from the forward", which a surrogate or straight-through backward must not do, but what the entry
#: declares.
INTENDED_FIX = ("not the intended gradient: gradient of input #",
                "the backward differs from the declared proxy's (or declared VJP's) gradient: check that the proxy "
                "or VJP is the intended one, "
                "whether an output narrower than its input rounds the gradient reaching the backward (the message "
                "says so), and where the difference sits (the replay prints both gradients)")
#: statistics runs at most this many examples a cell, each drawing the target (and the reference) this many times.
STATISTICS_EXAMPLES, STATISTICS_DRAWS = 2, 2000


def _not_loaded(subject, case) -> None:
    raise RuntimeError("a declaration's property lives in its check's module: use audit.checks.builtin()")


def _dtype_with_probes(entry: Entry) -> tuple[str, ...]:
    """Every claimed dtype, plus the low-precision probes for an entry that claims a real dtype. A complex-only
    entry gets none: float16 and bfloat16 are not its numbers (a real probe would drop every imaginary part and
    report what no caller does), and torch's half-precision complex (complex32) has almost no kernels."""
    probes = LOW_PRECISION_DTYPES if _claims_real(entry) else ()
    return tuple(dict.fromkeys(entry.supports.dtypes + probes))


def _claims_real(entry: Entry) -> bool:
    """Whether the entry claims some real dtype (not only complex ones)."""
    return any(dtype not in COMPLEX_DTYPES for dtype in entry.supports.dtypes)


def _autocast_dtypes(entry: Entry) -> tuple[str, ...]:
    """float32, autocast's input dtype; complex64 for a complex-only entry, whose cell then says why it is a skip."""
    return ("float32",) if _claims_real(entry) else ("complex64",)


def _two_differentiable_inputs(entry: Entry) -> bool:
    """Two or more inputs that can require grad: only then can some require it and others not."""
    return sum(getattr(spec, "differentiable", False) for spec in entry.inputs) >= 2


def _sampled(entry: Entry) -> bool:
    """A stochastic entry with a reference sampler: without one there is no distribution to compare with."""
    return not entry.supports.deterministic and entry.reference is not None


def _batch_reaches_two(entry: Entry) -> bool:
    """A declared batch dim that may reach 2."""
    return entry.batch is not None and entry.dim_range(entry.batch)[1] >= MIN_BATCH


#: Every built-in check's declaration, in the matrix's column order: the one list of the built-in check names. The
#: order is a user-facing format (reports and diffs stay comparable across versions): a new check is appended,
#: never inserted, renamed or removed (tests/test_vocabulary.py holds the names released so far).
_DECLARATIONS = (
    Check(
        name="forward",
        short="fwd",
        run=_not_loaded,
        contract="forward runs on every drawn case; with a reference, values match it "
                 "(float64: atol 1e-10, rtol 1e-9; half precision, and float32 without float64: within a few "
                 "times the reference's own error in that dtype; otherwise torch.testing's defaults); "
                 "without one, finite inputs give finite outputs",
        dtypes=claimed_dtypes,
        version=3,
        fixes=(("output #", "the forward's value differs from the reference's: fix the forward, or where the "
                            "difference is that dtype's rounding, set tolerance: for it in the registry"),),
    ),
    Check(
        name="gradcheck",
        short="grad",
        needs_gradient=True,
        run=_not_loaded,
        contract="the analytic gradient equals central finite differences (torch.autograd.gradcheck, "
                 "slow mode up to 1,024 input elements, fast mode with atol scaled by size beyond), with "
                 "respect to a module's parameters too (fast mode, atol scaled by their size), and with a "
                 "reference, equals the reference's "
                 "gradient at float64-tight tolerance (in half precision, and in float32 without float64, within "
                 "2x, in float32 10x, the error the reference itself makes in that dtype, and no finite "
                 "differences below float32); special points (zeros, bounds, identity, rotations, repeated "
                 "singular values, equal arguments...) are tried before random draws; with a proxy (an intended "
                 "gradient), the gradient equals the proxy's float64 autograd gradient instead, with a declared VJP "
                 "(a rule of its own) the VJP's float64 gradients on random, zero and non-contiguous cotangents, "
                 "and no finite differences of the forward are taken",
        version=5,
        special=True,
        fixes=(("gradient of input #", "the backward's formula for that input is wrong: derive it again from the "
                                       "forward (the replay prints the analytic and the numeric gradient)"),
               INTENDED_FIX,
               ("Jacobian mismatch for output # with respect to input #",
                "the backward's formula for that input is wrong: derive it again from the forward (the replay prints "
                "the analytic and the numeric Jacobian)")),
    ),
    Check(
        name="gradgradcheck",
        short="grad2",
        needs_gradient=True,
        not_for_sparse="torch.autograd.gradgradcheck refuses the sparse first-order gradients it would differentiate "
                       "(\"Sparse output is not supported at gradcheck yet\")",
        run=_not_loaded,
        contract="the backward is itself differentiable and its gradient equals finite differences "
                 "(torch.autograd.gradgradcheck), or with a proxy the proxy's second derivative (a skip with a "
                 "declared VJP, which defines none); claimed through "
                 "supports.double_backward",
        claimed=lambda entry: entry.supports.double_backward,
        claim="supports.double_backward",
        version=5,
        special=True,
    ),
    Check(
        name="forward_ad",
        short="jvp",
        needs_gradient=True,
        not_for_sparse="forward-mode AD carries no sparse tangents through a custom Function (torch: \"Cannot access "
                       "storage of SparseTensorImpl\")",
        run=_not_loaded,
        contract="the jvp (forward-mode AD) equals finite differences, or with a proxy the proxy's jvp (a skip with "
                 "a declared VJP, which defines none); claimed "
                 "through supports.forward_ad",
        claimed=lambda entry: entry.supports.forward_ad,
        claim="supports.forward_ad",
        version=4,
        special=True,
    ),
    Check(
        name="undefined_grad",
        short="undef",
        needs_gradient=True,
        run=_not_loaded,
        contract="backward through any one output alone (the others' gradients undefined) works and "
                 "equals backward with explicit zeros for the others",
    ),
    Check(
        name="empty",
        run=_not_loaded,
        contract="when a dim may be 0 (its range starts at 0), forward and backward run on empty "
                 "tensors and gradients have the inputs' shapes",
        applies=lambda entry: entry.may_be_empty,
        empty=True,
    ),
    Check(
        name="determinism",
        short="det",
        run=_not_loaded,
        contract="two runs on the same inputs give bitwise-equal outputs and gradients; "
                 "claimed unless supports.deterministic is false",
        claimed=lambda entry: entry.supports.deterministic,
        claim="supports.deterministic",
        dtypes=claimed_dtypes,
    ),
    Check(
        name="dtype",
        run=_not_loaded,
        contract="in each claimed dtype (and, as unclaimed probes for an entry claiming a real dtype, float16 and "
                 "bfloat16), forward and backward "
                 "run, outputs and gradients come back in the input's dtype, and values and gradients are close "
                 "to a wider computation on the same inputs: in float64, the reference at tight tolerance; in half "
                 "precision (and float32 without float64) with a reference, the reference in float64, within a "
                 "few times the error the reference itself makes in that dtype; else the target in its most "
                 "precise claimed dtype, at torch.testing's tolerance (the target never runs in a dtype it does "
                 "not claim); with a proxy, gradients against the proxy's float64 autograd gradient, with a declared "
                 "VJP against its float64 gradients on random, zero and non-contiguous cotangents",
        dtypes=_dtype_with_probes,
        dtype_claimed=lambda entry, dtype: dtype in entry.supports.dtypes,
        claim="supports.dtypes",
        version=4,
        fixes=tuple((f"{what} is {got} for {given} inputs", "compute in the input's dtype, or cast the result back "
                     "before returning it (a backward returns each gradient in its input's dtype)")
                    for what in ("output #", "gradient of input #")
                    for got, given in (("float32", "float64"), ("float64", "float32"), ("float32", "float16"),
                                       ("float32", "bfloat16"))) + (INTENDED_FIX,),
    ),
    Check(
        name="device",
        short="dev",
        run=_not_loaded,
        contract="on each claimed device outputs and gradients live on the input's device and match the CPU "
                 "result within the dtype's tolerance; a device that is not present is a skip",
        dtypes=claimed_dtypes,
    ),
    Check(
        name="noncontiguous",
        short="strides",
        not_for_sparse="a sparse tensor has no strides to rearrange (its indices and values are stored apart)",
        run=_not_loaded,
        contract="every tensor input given transposed, step-sliced, with a storage offset or channels_last "
                 "(drawn) gives the outputs and gradients of the contiguous input; non-contiguous and "
                 "expanded (stride-0) grad_outputs give the gradients of dense ones; claimed through "
                 "supports.noncontiguous (default true)",
        claimed=lambda entry: entry.supports.noncontiguous,
        claim="supports.noncontiguous",
        layouts=True,
        version=2,
        fixes=(("gradient of input #", "the backward assumes a contiguous layout: call .contiguous() on what it "
                                       "indexes (inputs, saved tensors, grad_output), or index by strides"),
               ("output #", "the forward assumes a contiguous layout: call .contiguous() on its inputs, or index by "
                            "strides")),
    ),
    Check(
        name="alias",
        not_for_sparse="it compares inputs' and outputs' strided storages and version counters, which sparse tensors "
                       "do not expose",
        run=_not_loaded,
        contract="forward modifies only the inputs declared in mutates (values and version counters compared), "
                 "and those it must modify and mark dirty; an output shares storage with an input only if "
                 "declared in views (or mutates); backward modifies neither grad_output nor the inputs; a "
                 "returned gradient keeps its values when the target runs again, and an in-place update of it "
                 "(grad += 1) changes no input, output or later gradient (gradients may share memory with each "
                 "other or with grad_output, as torch's own add and cat do)",
        version=2,
        fixes=(("output # shares storage with input # (a view or the input itself where a copy was promised)",
                "return a copy (.clone()), or declare views: [that input] in the registry"),),
    ),
    Check(
        name="saved_tensors",
        short="saved",
        needs_gradient=True,
        not_for_sparse="its in-place write between forward and backward (mul_(2).add_(0.5)) is dense arithmetic a "
                       "sparse tensor does not support",
        run=_not_loaded,
        contract="after forward, modifying any input or output in place either makes backward raise autograd's "
                 "'modified by an inplace operation' error or leaves the gradient unchanged; a silently "
                 "different gradient means a tensor kept outside save_for_backward",
        fixes=tuple((f"after {what} # was modified in place between forward and backward, backward silently returned "
                     "a different gradient", "keep what backward reads with ctx.save_for_backward (autograd then "
                     "refuses a tensor modified since), not on ctx, and read ctx.saved_tensors once")
                    for what in ("input", "output")),
    ),
    Check(
        name="vmap",
        not_for_sparse="torch.func.vmap does not batch sparse tensors",
        run=_not_loaded,
        contract="torch.func.vmap (batch dim at drawn positions, some inputs unbatched) equals the per-sample loop "
                 "for outputs and vjps; jacrev, and jacfwd with forward_ad, equal finite differences; claimed "
                 "through supports.vmap",
        claimed=lambda entry: entry.supports.vmap,
        claim="supports.vmap",
        batched=True,
        version=3,
    ),
    Check(
        name="compile",
        repro_settings=("compile_backend",),
        not_for_sparse="Dynamo and AOTAutograd do not trace sparse tensors through a custom Function",
        run=_not_loaded,
        contract="torch.compile on the chosen backend (aot_eager by default: Dynamo and AOTAutograd) gives "
                 "eager's outputs and gradients without crashing, and does not recompile on every new shape "
                 "(supports.compile: true; graph breaks are recorded in metrics); with supports.compile: "
                 "fullgraph it also traces as one graph (fullgraph=True), and a graph break fails",
        claimed=lambda entry: bool(entry.supports.compile),  # true or "fullgraph"
        claim="supports.compile",
        kinds=OPERATOR_KINDS + ("model",),
        version=3,
    ),
    Check(
        name="autocast",
        short="amp",
        not_for_sparse="autocast's casting policy covers dense kernels only",
        run=_not_loaded,
        contract="under torch.autocast (CPU bfloat16, CUDA float16) forward and backward run, outputs have the dtype "
                 "the reference gets from autocast's policy (else float32 or the low dtype), and outputs and "
                 "gradients are finite, in the input's dtype and close to float32's; claimed through supports.autocast",
        claimed=lambda entry: entry.supports.autocast,
        claim="supports.autocast",
        dtypes=_autocast_dtypes,
        version=2,
    ),
    Check(
        name="checkpoint",
        short="ckpt",
        needs_gradient=True,
        run=_not_loaded,
        contract="under torch.utils.checkpoint.checkpoint(use_reentrant=False) outputs and gradients equal the "
                 "unchecked run, and forward is pure (the same inputs and RNG state give the same values); "
                 "claimed through supports.checkpoint (default true)",
        claimed=lambda entry: entry.supports.checkpoint,
        claim="supports.checkpoint",
        version=2,
    ),
    Check(
        name="opcheck",
        short="opchk",
        not_for_sparse="torch.library.opcheck's fake-tensor and AOT tests do not take sparse inputs",
        run=_not_loaded,
        contract="torch.library.opcheck (schema, autograd registration, fake tensor, AOT dispatch) passes on drawn "
                 "inputs, non-contiguous ones included when supports.noncontiguous; always required of an op",
        applies=lambda entry: entry.kind == EntryKind.OP,
        layouts="mixed",
    ),
    Check(
        name="export",
        not_for_sparse="torch.export takes strided example inputs only",
        run=_not_loaded,
        contract="torch.export.export (non-strict and strict, dynamic dims where the registry's vary) traces, "
                 "saves, loads and runs, and the loaded program gives eager's outputs (a strict export that does "
                 "not trace: the cell says it judged the non-strict one only); claimed through supports.export",
        claimed=lambda entry: entry.supports.export,
        claim="supports.export",
        version=2,
    ),
    Check(
        name="distributed",
        short="ddp",
        not_for_sparse="the batch is split across ranks by slicing strided inputs",
        run=_not_loaded,
        contract="under DistributedDataParallel (2 CPU ranks, gloo, loopback) with a batch split across ranks, the "
                 "synchronised gradients equal one process's on the whole batch, and no rank errors or hangs; "
                 "claimed through supports.distributed",
        claimed=lambda entry: entry.supports.distributed,
        claim="supports.distributed",
        resource="ranks",
    ),
    Check(
        name="state_dict",
        short="sd",
        run=_not_loaded,
        contract="kind module: after torch.save of the state_dict and load_state_dict into a fresh instance (built "
                 "from another seed), outputs and gradients (inputs and parameters) are unchanged",
        kinds=("module",),
    ),
    Check(
        name="train_step",
        short="train",
        run=_not_loaded,
        contract="kind model: on every scanned batch the loss and every parameter gradient are finite (a non-finite "
                 "value is traced to its operation and custom Function), and SGD steps lower the loss on a "
                 "repeated batch; records losses, gradient norms, step time and peak memory",
        kinds=("model",),
        dtypes=lambda entry: ("float32",),
    ),
    Check(
        name="accumulation",
        short="accum",
        run=_not_loaded,
        contract="kind model: gradients accumulated over micro-batches (each loss weighted by its share) equal the "
                 "whole batch's",
        kinds=("model",),
        dtypes=lambda entry: ("float32",),
    ),
    Check(
        name="partial_grad",
        short="part",
        needs_gradient=True,
        run=_not_loaded,
        contract="with only one differentiable input requiring grad (each in turn), backward runs and gives it "
                 "the gradient it gets when every input requires grad",
        applies=_two_differentiable_inputs,
    ),
    Check(
        name="shared_grad",
        short="shared",
        needs_gradient=True,
        not_for_sparse="it slices samples out of the batch as strided tensors",
        run=_not_loaded,
        contract="for an entry with batch: B (samples along B independent), at batch sizes of 2 and up each "
                 "sample's outputs and batched-input gradients equal that sample's alone, and an input without B "
                 "(shared across the batch), and each parameter of a module, gets the sum of its per-sample gradients",
        applies=_batch_reaches_two,
        version=2,
        min_batch=MIN_BATCH,
    ),
    Check(
        name="statistics",
        short="stats",
        run=_not_loaded,
        contract="for a stochastic entry (supports.deterministic: false) with a reference sampler, on fixed inputs, "
                 f"the target's outputs over {STATISTICS_DRAWS:,} independent draws of the random stream have the "
                 "reference's distribution (per element: two-sample Kolmogorov-Smirnov and z-test of the means) and "
                 "its gradients the reference's mean (an unbiased estimator); false-alarm probability at most 1e-3 a "
                 "cell (Bonferroni over elements, tests, stages and examples); never compares draw by draw",
        applies=_sampled,
        examples=STATISTICS_EXAMPLES,
        not_for_sparse="its tests compare dense outputs and gradients element by element; sparse inputs are not "
                       "covered yet",
    ),
)


def _by_name(checks) -> dict[str, Check]:
    """The declarations by name, in their order; a name declared twice is the audit's bug."""
    by_name = {check.name: check for check in checks}
    if len(by_name) != len(checks):
        raise InternalError(f"a check name is declared twice in catalog.py: {[check.name for check in checks]}")
    return by_name


#: Every built-in check's declaration by name, in matrix order.
CATALOG: dict[str, Check] = _by_name(_DECLARATIONS)


def declared(name: str, *, run=None, replay=None, model_replay=None, replay_helpers: tuple = (),
             script_values=None, refusals: tuple = (), stages: tuple = ()) -> Check:
    """The built-in check ``name``: its declaration here, with its code from its module: its property, and how it
    is judged (``refusals``, ``stages`` and their excuses, :mod:`audit.checking.judgement`; without ``run``, the
    declaration is judged: :func:`audit.checking.judgement.examine`)."""
    return replace(CATALOG[name], run=run, replay=replay, model_replay=model_replay, replay_helpers=replay_helpers,
                   script_values=script_values, refusals=refusals, stages=stages)
