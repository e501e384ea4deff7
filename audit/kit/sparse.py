"""Sparse inputs: built from a pattern, their gradients' layout and pattern judged."""

from __future__ import annotations

import torch
from audit.kit.autograd import grad_inputs


def sparse_from(values, pattern, layout: str):
    """The elements of ``values`` where ``pattern`` is True (explicit zeros included), as a coalesced sparse
    tensor of ``layout`` (sparse_coo or sparse_csr), specified in row-major order."""
    coo = torch.sparse_coo_tensor(pattern.nonzero().t(), values[pattern], values.shape, is_coalesced=True,
                                  check_invariants=True)
    return coo if layout == "sparse_coo" else coo.to_sparse_csr()


def specified(x):
    """A bool tensor of ``x``'s shape: True where sparse ``x`` specifies an element (everywhere when dense)."""
    if x.layout == torch.strided:
        return torch.ones(x.shape, dtype=torch.bool, device=x.device)
    coo = x.detach().to_sparse_coo().coalesce()
    mask = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
    mask[tuple(coo.indices())] = True
    return mask


def sparse_gradient_problem(index: int, x, grad) -> str:
    """Why ``grad`` cannot be the gradient of sparse input ``x`` ("" when it can, or when ``x`` is dense): it must
    have ``x``'s layout and no nonzero value outside ``x``'s pattern (masked semantics: the gradient lives on the
    specified elements only, and ``x.grad`` keeps ``x``'s layout)."""
    if x.layout == torch.strided or grad is None:
        return ""
    expected = str(x.layout).replace("torch.", "")
    got = "strided (dense)" if grad.layout == torch.strided else str(grad.layout).replace("torch.", "")
    fix = (f"return a {expected} gradient with the input's pattern, e.g. the dense gradient sampled there: "
           "dense_grad.sparse_mask(x)")
    if grad.layout != x.layout:
        return f"gradient of sparse input {index} came back {got}, expected {expected} (the input's layout); {fix}"
    outside = (grad.detach().to_dense() != 0) & ~specified(x)
    if outside.any():
        where = tuple(int(i) for i in outside.nonzero()[0])
        return (f"gradient of sparse input {index} has {int(outside.sum())} nonzero value(s) outside the input's "
                f"pattern ({int(specified(x).sum())} of {x.numel()} elements specified), e.g. at index {where}; {fix}")
    return ""


def sparse_gradient_problems(args, found) -> list:
    """:func:`sparse_gradient_problem` for each input that requires grad and its gradient ``found``."""
    problems = [sparse_gradient_problem(i, x, g) for i, (x, g) in enumerate(zip(grad_inputs(args), found))]
    return [p for p in problems if p]


def through_dense(f):
    """``f`` called with each sparse argument made dense (differentiably: zeros where unspecified, and the gradient
    that flows back is sparse, on the argument's pattern): how a reference, which may be plain dense code, is
    called, so that its gradient is the dense gradient restricted to the pattern (masked semantics)."""
    def call(*args, **kwargs):
        return f(*[a.to_dense() if torch.is_tensor(a) and a.layout != torch.strided else a for a in args], **kwargs)
    return call
