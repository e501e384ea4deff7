"""``audit run --record``: the entries' behaviour recorded by record workers, beside the matrix.

The entries are shared round-robin among up to ``-j`` record workers (:mod:`audit.behaviour.worker`), each a process
of its own: a crash, a hang past ``--timeout`` or a memory blow-up while recording one entry makes that entry's record
an error that says so, and a fresh worker goes on with the rest of its share. Everything is written to a temporary
folder beside the record and moved into place at the end, the old record removed only then: an interrupted run
leaves the previous record whole, never half of a new one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from audit.behaviour.store import FOLDER, manifest, matrix_key, write_manifest
from audit.behaviour.values import EntryRecord
from audit.behaviour.worker import file_stem
from audit.registry.model import Entry, Registry
from audit.runtime.options import RunOptions

#: How often the parent looks at its record workers, in seconds.
POLL = 0.05


@dataclass
class Share:
    """One record worker's entries, what it has recorded, and the process recording the rest."""

    names: list[str]
    spec: dict
    folder: Path
    process: subprocess.Popen | None = None
    started: float = 0.0
    lost: dict[str, str] = field(default_factory=dict)
    log: Path | None = None

    def done(self, name: str) -> bool:
        """Whether ``name`` has its record (or was lost with a worker)."""
        return name in self.lost or (self.folder / f"{file_stem(name)}.json").exists()

    def left(self) -> list[str]:
        """The entries still to record."""
        return [n for n in self.names if not self.done(n)]

    def current(self) -> str | None:
        """The entry being recorded now: started (its mark written) and not done."""
        return next((n for n in self.left() if (self.folder / f"{file_stem(n)}.current").exists()), None)

    def overdue(self, options: RunOptions) -> bool:
        """Whether the worker has spent more than ``--timeout`` on its current entry (counted from that entry's mark),
        or more than its start-up budget before marking any."""
        name = self.current()
        if name is None:
            return time.monotonic() - self.started > options.startup_budget
        since = time.time() - (self.folder / f"{file_stem(name)}.current").stat().st_mtime
        return since > options.timeout


def record(registry: Registry, entries: list[Entry], out: Path, options: RunOptions, devices: tuple[str, ...],
           environment: dict, against: Path | None = None, dtypes: tuple[str, ...] | None = None) -> dict:
    """Record ``entries`` into ``out/behaviour`` (in ``dtypes`` only, if given, of those each claims); what the
    matrix says of the record (its files' digests)."""
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".behaviour-", dir=out))
    try:
        shares = _shares(registry, entries, scratch, options, devices, against, dtypes)
        _run(shares, options)
        records = [_read(entry, shares, scratch) for entry in entries]
        folder = scratch / "record"
        (folder / "entries").mkdir(parents=True)
        files = {}
        for entry, made_record in zip(entries, records):
            made = scratch / f"{file_stem(entry.name)}.pt"
            if made.exists() and not made_record.error:
                files[entry.name] = made.rename(folder / "entries" / made.name)
        numerics = _numerics(scratch)
        write_manifest(folder, manifest(registry.sha256, options.seed, environment, numerics, records, files))
        _swap(folder, out / FOLDER)
        return matrix_key(out / FOLDER)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _shares(registry, entries, scratch, options, devices, against, dtypes) -> list[Share]:
    names = [e.name for e in entries]
    count = max(1, min(options.jobs, len(names)))
    shares = []
    for index in range(count):
        spec = {"registry": registry.path, "entries": names[index::count], "seed": options.seed,
                "folder": str(scratch), "base": options.base, "devices": list(devices),
                "against": str(against) if against else None, "max_memory": options.max_memory,
                "dtypes": list(dtypes) if dtypes else None}
        shares.append(Share(names[index::count], spec, scratch))
    return [s for s in shares if s.names]


def _run(shares: list[Share], options: RunOptions) -> None:
    """Run every share to its end, replacing a worker that died or hung; whatever ends this early (Ctrl-C, SIGTERM)
    ends every record worker with it."""
    try:
        for share in shares:
            _start(share)
        while any(share.process is not None for share in shares):
            time.sleep(POLL)
            for share in shares:
                _look(share, options)
    finally:
        for share in shares:
            if share.process is not None and share.process.poll() is None:
                share.process.kill()
                share.process.wait()


def _start(share: Share) -> None:
    left = share.left()
    if not left:
        share.process = None
        return
    spec = dict(share.spec, entries=left)
    path = share.folder / f"spec-{os.getpid()}-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    with open(path.with_suffix(".log"), "wb") as log:  # a file, not a pipe: a chatty target never blocks on it
        share.process = subprocess.Popen([sys.executable, "-m", "audit.behaviour.worker", str(path)],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    share.log = path.with_suffix(".log")
    share.started = time.monotonic()


def _look(share: Share, options: RunOptions) -> None:
    process = share.process
    if process is None:
        return
    code = process.poll()
    if code is None:
        if share.overdue(options):
            process.kill()
            process.wait()
            _lose(share, f"timed out: its record took more than --timeout {options.timeout:g} s")
            _start(share)
        return
    stderr = share.log.read_text(errors="replace").strip() if share.log else ""
    if share.left():
        _lose(share, _ended(code, stderr))
    _start(share)


def _ended(code: int, stderr: str) -> str:
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    last = stderr.splitlines()[-1] if stderr else ""
    return f"the record worker {how} while recording it" + (f": {last}" if last else "")


def _lose(share: Share, why: str) -> None:
    """The entry the worker was on is lost (or, if it never began one, the first left)."""
    lost = share.current() or share.left()[0]
    share.lost[lost] = why
    (share.folder / f"{file_stem(lost)}.current").unlink(missing_ok=True)


def _read(entry: Entry, shares: list[Share], scratch: Path) -> EntryRecord:
    made = scratch / f"{file_stem(entry.name)}.json"
    if made.exists():
        return EntryRecord.from_json(json.loads(made.read_text(encoding="utf-8")))
    why = next((s.lost[entry.name] for s in shares if entry.name in s.lost), "not recorded")
    return EntryRecord(entry.name, entry.kind.value, error=why)


def _numerics(scratch: Path) -> dict:
    path = scratch / "numerics.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _swap(made: Path, final: Path) -> None:
    """``made`` in place of ``final``: the old record is renamed away, the new one renamed in, then the old removed."""
    old = final.with_name(f".{final.name}-old-{os.getpid()}")
    if final.exists():
        final.rename(old)
    made.rename(final)
    shutil.rmtree(old, ignore_errors=True)
