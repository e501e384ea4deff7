"""Progress on stderr: a rich bar on an interactive terminal, one plain line per entry otherwise."""

from __future__ import annotations

import sys

from audit.core.contract import Status


class PlainProgress:
    """One line per finished entry: ``[3/7] cube: 6 pass, 1 fail (2.4 s)``."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def __call__(self, event) -> None:
        if event.kind != "entry_end":
            return
        cells = event.result.cells
        counts = {s.value: sum(c.status == s for c in cells) for s in Status}
        text = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        seconds = sum(c.seconds for c in cells)
        print(f"[{event.done}/{event.total}] {event.entry.name}: {text} ({seconds:.1f} s)", file=self.stream,
              flush=True)


class BarProgress:
    """A rich progress bar counting cells, naming the entry and the check just judged."""

    def __init__(self):
        from rich.console import Console
        from rich.progress import Progress

        self.progress = Progress(console=Console(stderr=True), transient=True)
        self.task = None

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, event) -> None:
        if self.task is None:
            self.task = self.progress.add_task("auditing", total=event.cells_total)
        if event.kind == "entry_start":
            self.progress.update(self.task, description=f"auditing {event.entry.name}")
        elif event.kind == "cell":
            self.progress.update(self.task, completed=event.cells_done,
                                 description=f"auditing {event.entry.name} · {event.cell.check}")


class NoProgress:
    """Nothing at all: ``-q`` shows only the failing cells and the verdict."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def __call__(self, event) -> None:
        return None


def progress(mode: str):
    """The reporter for ``--progress``: ``auto`` picks the bar on an interactive terminal; ``quiet`` (``-q``) is
    silent."""
    from rich.console import Console

    if mode == "quiet":
        return NoProgress()
    interactive = Console(stderr=True).is_interactive
    return BarProgress() if mode == "on" or (mode == "auto" and interactive) else PlainProgress()
