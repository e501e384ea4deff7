"""``statistics``: a stochastic entry draws from its reference sampler's distribution, and its gradient is unbiased.

On the case's fixed inputs, the target and the reference are each called many times (forward and backward with
the cell's cotangents), each from its own seeded stream: the draws are independent, so code that uses the random
stream differently from the reference (``rand < p`` against ``bernoulli``, more or fewer draws) is compared by
distribution, never draw by draw. Per output element: a two-sample Kolmogorov-Smirnov test (exact for equal
sizes, Gnedenko-Korolyuk; conservative with ties, so discrete outputs such as dropout's ``0`` or ``x / (1 - p)``
are fine) and a two-sample z-test of the means. Per gradient element: a z-test of the means only (another
estimator may have another spread; an unbiased one has the same mean). Each test allows the dtype's tolerance
(a difference within it is no difference), so rounding between equal formulas never counts. Elements constant in
every draw on both sides are compared directly: equal within the tolerance passes, different fails. Each output
and gradient is tested on its first 256 elements (in memory order), so that the samples' memory stays bounded.

False alarms: :data:`ALPHA` per cell, split evenly (Bonferroni, valid whatever the dependence between
elements, examples and stages) over the cell's examples (at most :data:`EXAMPLES`), two stages (a first look
after 1/8 of the draws, so a gross bug costs little, then all draws), and every statistic of a stage.
"""

from __future__ import annotations

import math

import torch

from audit.catalog.checks import STATISTICS_DRAWS, STATISTICS_EXAMPLES, declared
from audit.catalog.interface import tolerance_values
from audit.kit.autograd import vjp
from audit.kit.calls import reseed
from audit.core.contract import COMPLEX_DTYPES

#: The false-alarm probability of one cell (a correct target failing).
ALPHA = 1e-3
#: Draws of the target, and as many of the reference, per example.
DRAWS = STATISTICS_DRAWS
#: At most this many examples per cell (the check's cap), over which ALPHA is split.
EXAMPLES = STATISTICS_EXAMPLES


def sample(f, args, mutates, seed, draws, cell_seed, elements=256):
    """``draws`` calls of ``f`` on fresh copies of ``args``, torch's generator seeded once with ``seed``: a row per
    call of its floating outputs and the gradients of <outputs, cotangents drawn from ``cell_seed``> (see
    :func:`drawn`), each flattened and cut to its first ``elements`` (the samples' memory stays bounded), in
    float64; and each part's (label, shape, columns)."""
    reseed(seed)
    rows, parts, cots = [], None, None
    for _ in range(draws):
        outs, inputs, grads, cots = drawn(f, args, mutates, cots, cell_seed)
        row = [t.detach().reshape(-1)[:elements].double().cpu() for t in outs + grads]
        rows.append(torch.cat(row or [torch.zeros(0)]))
        labels = [f"output {k}" for k in range(len(outs))] + [f"gradient of input {i}" for i, _ in inputs]
        parts = parts or [(label, tuple(t.shape), len(r)) for label, t, r in zip(labels, outs + grads, row)]
    return torch.stack(rows).double(), parts


def drawn(f, args, mutates, cots, cell_seed):
    """One call of ``f`` on fresh leaves (a clone passed where it writes in place): its floating outputs, the
    inputs that require grad by position, their gradients of <outputs, cots> (zeros where unused), and ``cots``
    (drawn on the first call from ``cell_seed`` in float64, as the audit draws cotangents)."""
    xs = [a.detach().clone().requires_grad_(a.requires_grad) if torch.is_tensor(a) else a for a in args]
    out = f(*[x.clone() if i in mutates and torch.is_tensor(x) else x for i, x in enumerate(xs)])
    outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
            if torch.is_tensor(o) and o.is_floating_point()]
    inputs = [(i, x) for i, x in enumerate(xs) if torch.is_tensor(x) and x.requires_grad]
    if cots is None:
        generator = torch.Generator().manual_seed(cell_seed)
        cots = [torch.randn(o.shape, generator=generator, dtype=torch.float64).to(o) for o in outs]
    live = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
    leaves = [x for _, x in inputs]
    found = (vjp([o for o, _ in live], leaves, [c for _, c in live]) if live and inputs
             else [torch.zeros_like(x) for x in leaves])
    return outs, inputs, found, cots


def ks_pvalue(n, c):
    """P(D >= c/n) for the two-sample Kolmogorov-Smirnov statistic D of two samples of ``n`` from one continuous
    distribution (exact, Gnedenko-Korolyuk); with ties it only overstates the probability (conservative)."""
    total, k = 0.0, 1
    while c > 0 and k * c <= n:
        term = math.exp(2 * math.lgamma(n + 1) - math.lgamma(n - k * c + 1) - math.lgamma(n + k * c + 1))
        total += term if k % 2 else -term
        if term < 1e-300:
            break
        k += 1
    return min(1.0, max(0.0, 2 * total)) if c > 0 else 1.0


def ks_counts(t, r, atol, rtol):
    """Per column, n times the KS distance between ``t`` and ``r`` (n rows each) where values within
    ``atol + rtol * |x|`` count as equal: never larger than the plain distance, so its p-value stays valid."""
    ts = t.nan_to_num(nan=math.inf).T.contiguous().sort(dim=1).values
    rs = r.nan_to_num(nan=math.inf).T.contiguous().sort(dim=1).values

    def above(a, b):  # max over points x of a of: #a <= x  minus  #b <= x + tolerance
        above = torch.searchsorted(b, a + atol + rtol * a.abs(), right=True)
        return (torch.searchsorted(a, a, right=True) - above).amax(dim=1)

    return torch.maximum(above(ts, rs), above(rs, ts)).clamp(min=0)


def mean_pvalues(t, r, atol, rtol):
    """Per column, the two-sided p-value of the z-test that the means differ by more than ``atol + rtol * |mean|``
    (0 where both samples are constant and differ by more; 1 where they agree). The standard error is the two
    samples' together (with equal sizes, never below the two variances' unless by the factor (2n - 2) / (2n - 1)):
    the separate variances of two Bernoulli samples move with their means, and understate it in the tail."""
    n = t.shape[0]
    mt, mr = t.mean(0), r.mean(0)
    spread = t.var(0) + r.var(0)  # 0: both constant, compared directly
    se = (2 * torch.cat([t, r]).var(0) / n).sqrt().masked_fill(spread == 0, 0.0)
    excess = ((mt - mr).abs() - (atol + rtol * mr.abs())).clamp(min=0).nan_to_num(nan=math.inf)
    excess = excess.masked_fill(mt == mr, 0.0)  # equal infinities too
    z = (excess / se).masked_fill(excess == 0, 0.0).nan_to_num(nan=math.inf)  # constant and different: inf
    return torch.special.erfc(z / math.sqrt(2))


def rejected(t, r, outputs, alpha, atol, rtol):
    """The statistics' count, the threshold each p-value meets (``alpha`` over their count), and the first
    statistic under it as (p, column, test), or None: per output column (the first ``outputs``) KS then the
    mean test, then the mean test per gradient column."""
    n = t.shape[0]
    means = mean_pvalues(t, r, atol, rtol).tolist()
    known = {}
    ks = [known.setdefault(c, ks_pvalue(n, c)) for c in ks_counts(t[:, :outputs], r[:, :outputs], atol, rtol).tolist()]
    found = [item for j in range(outputs) for item in ((ks[j], j, "KS"), (means[j], j, "mean"))]
    found += [(means[j], j, "mean") for j in range(outputs, len(means))]
    threshold = alpha / max(1, len(found))
    return len(found), threshold, next((item for item in found if item[0] < threshold), None)


def described(t, r, parts, found, threshold, statistics, alpha, atol, rtol):
    """What differs (``found``: p, column, test), where, by how much, against what threshold."""
    p, j, test = found
    offset = 0
    for label, shape, columns in parts:  # noqa: B007 (the part that holds column j: used after the loop)
        if j < offset + columns:
            break
        offset += columns
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(j - offset), shape)) if shape else ()
    tc, rc, n = t[:, j], r[:, j], t.shape[0]
    if test == "KS":
        what, stat = "distribution", f"KS distance {ks_counts(tc[:, None], rc[:, None], atol, rtol).item() / n:.3g}"
    else:
        what, stat = "mean", f"z = {((tc.mean() - rc.mean()) / ((tc.var() + rc.var()) / n).sqrt()).item():.3g}"
    unbiased = ("; the gradient's mean must be the reference's (an unbiased estimator)"
                if label.startswith("gradient") else "")
    if all(x.std().item() <= atol + rtol * x.mean().abs().item() for x in (tc, rc)):
        return (f"{label} at index {index} is constant over {n} draws on both sides, and differs: target "
                f"{tc.mean().item():.6g}, reference {rc.mean().item():.6g} (allowed atol {atol:g} + rtol "
                f"{rtol:g}·|reference|){unbiased}")
    return (f"{label} at index {index}: its {what} over {n} draws differs from the reference's "
            f"(target mean {tc.mean().item():.6g}, sd {tc.std().item():.3g}; reference mean {rc.mean().item():.6g}, "
            f"sd {rc.std().item():.3g}); {test}: {stat}, p = {p:.3g} < threshold {threshold:.3g} (false-alarm "
            f"probability {alpha:g} per example, Bonferroni over 2 stages and {statistics} statistics){unbiased}")


def judged(fn, ref, args, mutates, seed, draws, alpha, atol, rtol):
    """The failure message of the two-stage test on one case ("" when it holds): a first look after draws // 8
    draws, then all draws, each stage at alpha / 2; the target's stream seeded from ``seed``, the reference's
    from ``seed + 1``, each stage's further draws from ``seed + 2`` and ``seed + 3``."""
    t = r = parts = None
    for stage, size in enumerate((draws // 8, draws - draws // 8)):
        t_new, parts = sample(fn, args, mutates, seed + 2 * stage, size, seed)
        r_new, ref_parts = sample(ref, args, mutates, seed + 2 * stage + 1, size, seed)
        if ref_parts != parts:
            return f"the target returns {parts} but the reference {ref_parts}: the samples cannot be compared"
        t = t_new if t is None else torch.cat([t, t_new])
        r = r_new if r is None else torch.cat([r, r_new])
        outputs = sum(columns for label, _, columns in parts if label.startswith("output"))
        statistics, threshold, found = rejected(t, r, outputs, alpha / 2, atol, rtol)
        if found:
            return described(t, r, parts, found, threshold, statistics, alpha, atol, rtol)
    return ""


def statistics(fn, ref, args, *, target, reference, mutates, seed, tol, draws, alpha) -> list:
    """The two-stage test (:func:`judged`) of the target against its reference sampler, both called as they are
    (each from its own seeded stream, not reset before each call), ``draws`` times each, at false-alarm
    probability ``alpha``, differences within ``tol``'s atol and rtol counting as none."""
    message = judged(target, reference, args, mutates, seed, draws, alpha, tol.atol, tol.rtol)
    return [f"{message}; the target drawn from seeds {seed} and {seed} + 2, the reference from {seed} + 1 and "
            f"{seed} + 3"] if message else []


def complex_entry(subject, case) -> str:
    """Why a complex cell is not tested."""
    if subject.dtype in COMPLEX_DTYPES:
        return ("its tests order and compare real values (Kolmogorov-Smirnov, means); a complex stochastic entry is "
                "not covered yet")
    return ""


def _values(subject, case) -> dict:
    """The comparison (the entry's tolerance), the draws per example and the false-alarm probability of one."""
    return {**tolerance_values(subject, case), "draws": DRAWS, "alpha": ALPHA / EXAMPLES}


CHECK = declared(
    "statistics",
    refusals=(complex_entry,),
    replay=statistics,
    replay_helpers=(sample, drawn, ks_pvalue, ks_counts, mean_pvalues, rejected, described, judged),
    script_values=_values,
)
