"""What the compile check needs from Dynamo: a fresh compiled function that counts its graphs and
records why it recompiled, a sweep of shapes, and graph breaks explained in one line."""

from __future__ import annotations

import contextlib
import logging

import torch

from audit.inputs.variants import resized
from audit.toolkit.violation import Violation

#: Shapes in the sweep; with automatic dynamic shapes, the third new shape must not compile again.
SWEEP = 4
#: Dynamo's default recompile limit (8) would silently fall back to eager mode; the audit wants to see.
RECOMPILE_LIMIT = 64
#: Dynamo specialises sizes 0 and 1; the sweep stays at 2 and above.
SPECIALISED = 2


class Compiled:
    """``torch.compile(fn)`` on a backend that counts the graphs it is handed; with ``fullgraph`` a graph
    break raises, without it the break is counted (and its first reason kept) and the rest runs eagerly."""

    def __init__(self, fn, backend: str, fullgraph: bool = True):
        inner = torch._dynamo.lookup_backend(backend)
        self.graphs = 0
        self.shapes: list = []
        self.graphs_before: list[int] = []
        self.recompiles: list[str] = []

        def counting(gm, example_inputs):
            self.graphs += 1
            return inner(gm, example_inputs)

        self.fn = torch.compile(fn, backend=counting, fullgraph=fullgraph)
        _RECOMPILES.sink = self.recompiles

    def note_shape(self, sizes: dict) -> None:
        """Record that the next call uses these dim sizes."""
        self.shapes.append(tuple(sorted(sizes.items())))
        self.graphs_before.append(self.graphs)

    def graph_breaks(self) -> dict:
        """How many graph breaks Dynamo took since :func:`compile_fresh`, and the first reason."""
        from torch._dynamo.utils import counters

        reasons = counters["graph_break"]
        first = next(iter(reasons), "")
        return {"graph_breaks": sum(reasons.values()), **({"graph_break": _explain(Exception(first))} if first else {})}

    def recompiles_every_shape(self) -> str | None:
        """Why the sweep failed when every new shape compiled new graphs (three shapes or more)."""
        new_shapes, compiled_for = set(), 0
        for shape, before, after in zip(self.shapes, self.graphs_before, self.graphs_before[1:] + [self.graphs]):
            if shape not in new_shapes:
                new_shapes.add(shape)
                compiled_for += after > before
        if len(new_shapes) < 3 or compiled_for < len(new_shapes):
            return None
        reason = self.recompiles[-1] if self.recompiles else "Dynamo gave no reason"
        return (f"torch.compile recompiled for every new shape ({self.graphs} graphs for {len(new_shapes)} shapes "
                f"with automatic dynamic shapes on): a size is specialised, e.g. turned into a Python int "
                f"(int(x.shape[0]), a shape-dependent branch or slice); last recompile: {reason}")


def compile_fresh(fn, backend: str, fullgraph: bool = True) -> Compiled:
    """A compiled ``fn`` with Dynamo's caches and counters cleared, so that its graphs, graph breaks and
    recompiles are its own."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(RECOMPILE_LIMIT, getattr(torch._dynamo.config, name)))
    _RECOMPILES.install()
    return Compiled(fn, backend, fullgraph)


def shape_sweep(entry, case) -> list:
    """(sizes, case) pairs: the drawn case resized through :data:`SWEEP` shapes, each symbolic dim
    stepping through its range at or above 2 (offset per dim, so dims rarely coincide)."""
    sweep = []
    for k in range(SWEEP):
        sizes = {}
        for index, name in enumerate(entry.symbols):
            low, high = entry.dim_range(name)
            start = max(low, SPECIALISED)
            if start > high:
                sizes[name] = high
                continue
            sizes[name] = start + (k + index) % (high - start + 1)
        sweep.append((sizes, resized(entry, case, sizes)))
    return sweep


@contextlib.contextmanager
def graph_breaks_explained():
    """Turn Dynamo's refusals (graph breaks under fullgraph, failed backends) into one-line violations."""
    try:
        yield
    except torch._dynamo.exc.Unsupported as exc:
        raise Violation(f"graph break under torch.compile(fullgraph=True): {_explain(exc)}") from None
    except torch._dynamo.exc.TorchDynamoException as exc:
        hint = f"; {SCALAR_HINT}" if "unbacked" in str(exc).lower() else ""
        raise Violation(f"torch.compile failed: {type(exc).__name__}: {_explain(exc)}{hint}") from None


SCALAR_HINT = ("a tensor became a Python number while tracing (.item(), int(t), float(t), a data-dependent "
               "size): keep it a tensor, or make its size a declared dynamic size")


def _explain(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return "(no message)"
    parts = [lines[0].rstrip(".")[:200]]
    parts += [line[:200] for line in lines[1:] if line.startswith(("Explanation:", "Developer debug context:"))
              and line.split(":", 1)[1].strip()][:1]
    where = next((line.lstrip("# ") for line in lines if line.startswith("# File")), "")
    return "; ".join(parts) + (f" ({where})" if where else "")


class _RecompileLog(logging.Handler):
    """Collects Dynamo's 'Recompiling function ...' records, out of the terminal's way."""

    def __init__(self):
        super().__init__()
        self.sink: list[str] = []
        self.installed = False

    def install(self) -> None:
        if self.installed:
            return
        try:
            torch._logging.set_logs(recompiles=True)
        except Exception:  # an older torch without the artifact: recompiles are counted, not explained
            return
        logger = logging.getLogger("torch._dynamo.guards.__recompiles")
        logger.propagate = False
        logger.handlers[:] = [self]
        self.installed = True

    def emit(self, record) -> None:
        guards = [line.strip("- ").strip() for line in record.getMessage().splitlines() if line.strip().startswith("-")]
        self.sink.append(guards[0] if guards else (record.getMessage().splitlines() or [""])[0])


_RECOMPILES = _RecompileLog()
