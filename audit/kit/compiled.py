"""torch.compile: graphs counted, recompiles explained, Dynamo's refusals in words."""

from __future__ import annotations

import torch


#: Dynamo's default recompile limit (8) would silently fall back to eager mode; the audit wants to see.
RECOMPILE_LIMIT = 64


SCALAR_HINT = ("a tensor became a Python number while tracing (.item(), int(t), float(t), a data-dependent "
               "size): keep it a tensor, or make its size a declared dynamic size")


class Compiled:
    """``torch.compile(f)`` on ``backend`` wrapped to count the graphs it is handed, Dynamo's caches, counters and
    recompile limits reset first, so that its graphs, graph breaks and recompiles are its own. With ``fullgraph``
    a graph break raises; without it the break is counted and the rest runs eagerly. :meth:`note_shape` before
    each call lets :meth:`recompiles_every_shape` say whether every new shape compiled again."""

    def __init__(self, f, backend: str, fullgraph: bool = True):
        import torch._dynamo
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                     "accumulated_cache_size_limit"):
            if hasattr(torch._dynamo.config, name):
                setattr(torch._dynamo.config, name, max(RECOMPILE_LIMIT, getattr(torch._dynamo.config, name)))
        inner = torch._dynamo.lookup_backend(backend)
        self.graphs = 0
        self.shapes: list = []
        self.graphs_before: list = []
        self.recompiles = recompile_reasons()

        def counting(gm, example_inputs):
            self.graphs += 1
            return inner(gm, example_inputs)

        self.fn = torch.compile(f, backend=counting, fullgraph=fullgraph)

    def note_shape(self, args) -> None:
        """Record that the next call takes the tensors of ``args``, of these shapes."""
        self.shapes.append(tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor)))
        self.graphs_before.append(self.graphs)

    def graph_breaks(self) -> dict:
        """How many graph breaks Dynamo took since this was made, and the first reason."""
        from torch._dynamo.utils import counters

        reasons = counters["graph_break"]
        first = next(iter(reasons), "")
        return {"graph_breaks": sum(reasons.values()), **({"graph_break": dynamo_explained(Exception(first))}
                                                          if first else {})}

    def recompiles_every_shape(self) -> str | None:
        """Why the calls fail when every new shape compiled new graphs (three shapes or more)."""
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


def recompile_reasons() -> list:
    """A new list that each of Dynamo's recompiles appends its reason to from now on (the first guard that failed),
    out of the terminal's way; it stays empty on a torch without the recompiles log."""
    import logging

    found: list = []
    try:
        torch._logging.set_logs(recompiles=True)
    except Exception:  # an older torch without the artifact: recompiles are counted, not explained
        return found

    def emit(record):
        guards = [line.strip("- ").strip() for line in record.getMessage().splitlines() if line.strip().startswith("-")]
        found.append(guards[0] if guards else (record.getMessage().splitlines() or [""])[0])

    handler = logging.Handler()
    handler.emit = emit  # type: ignore[method-assign]  # a handler that only collects
    logger = logging.getLogger("torch._dynamo.guards.__recompiles")
    logger.propagate = False
    logger.handlers[:] = [handler]
    return found


def dynamo_refusal(exc) -> str:
    """What a Dynamo exception says, in one line: a graph break under fullgraph, or a failed compile (with a hint
    where a tensor became a Python number)."""
    import torch._dynamo

    if isinstance(exc, torch._dynamo.exc.Unsupported):
        return f"graph break under torch.compile(fullgraph=True): {dynamo_explained(exc)}"
    hint = f"; {SCALAR_HINT}" if "unbacked" in str(exc).lower() else ""
    return f"torch.compile failed: {type(exc).__name__}: {dynamo_explained(exc)}{hint}"


def dynamo_explained(exc) -> str:
    """A Dynamo message's first line, its explanation and the user's line it points at: from the explanation where
    it names one, else from the graph-break record (:func:`dynamo_user_site`)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return "(no message)"
    parts = [lines[0].rstrip(".")[:200]]
    parts += [line[:200] for line in lines[1:] if line.startswith(("Explanation:", "Developer debug context:"))
              and line.split(":", 1)[1].strip()][:1]
    where = next((line.lstrip("# ") for line in lines if line.startswith("# File")), "") or dynamo_user_site(exc)
    return "; ".join(parts) + (f" ({where})" if where else "")


def dynamo_user_site(exc) -> str:
    """The innermost frame outside torch where Dynamo stopped, written as Dynamo's explanation writes it (File
    "...", line N, in name, code: ...), from the exception's record of the user's stack (torch 2.11's message no
    longer names the line in its explanation); "" when it has none."""
    import os

    inside = os.path.dirname(torch.__file__) + os.sep
    frames = [getattr(exc, "innermost_user_frame_summary", None), *reversed(getattr(exc, "real_stack", None) or ())]
    frame = next((f for f in frames if f is not None and not f.filename.startswith(inside)), None)
    if frame is None:
        return ""
    code = (frame.line or "").strip()
    return f'File "{frame.filename}", line {frame.lineno}, in {frame.name}' + (f", code: {code}" if code else "")
