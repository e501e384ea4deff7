"""``audit mutate``'s reports as text: the terminal's and Markdown's (for a job summary or a PR comment). Each
returns a string; nothing here prints."""

from __future__ import annotations

from audit.mutate.results import EQUIVALENT, ERRORED, FATES, SURVIVED, MutationRun


def _rate(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.0%}"


def _verdict(run: MutationRun) -> str:
    counts = run.counts
    line = (f"{sum(counts.values())} mutants: {counts['killed']} killed, {counts['survived']} survived, "
            f"{counts['equivalent']} equivalent, {counts['errored']} errored; kill rate {_rate(run.kill_rate)}")
    if run.min_kill_rate is None:
        return line
    below = run.below()
    gate = (f"FAIL: {len(below)} entr{'y' if len(below) == 1 else 'ies'} under --min-kill-rate "
            f"{run.min_kill_rate:.0%} ({', '.join(e.name for e in below)})" if below
            else f"PASS: every entry at or above --min-kill-rate {run.min_kill_rate:.0%}")
    return f"{line}\n{gate}"


def text(run: MutationRun, verbose: bool = False) -> str:
    """The terminal report: one line per entry, each survivor with its diff, the checks it passed and the
    suggestion; the first-kill table; the verdict."""
    lines = []
    for entry in run.entries:
        counts = entry.counts
        lines.append(f"{entry.name} ({', '.join(entry.owners)}): kill rate {_rate(entry.kill_rate)}  "
                     + "  ".join(f"{counts[f]} {f}" for f in FATES))
        for note in entry.notes:
            lines.append(f"  note: {note}")
        for mutant in entry.mutants:
            if mutant.fate == SURVIVED or (verbose and mutant.fate in (EQUIVALENT, ERRORED)):
                lines += _mutant_lines(mutant, "  ")
    if run.first_kills:
        lines.append("first kills by check: " + ", ".join(f"{check} {n}" for check, n in run.first_kills.items()))
    lines.append(_verdict(run))
    return "\n".join(lines) + "\n"


def _mutant_lines(mutant, indent: str) -> list[str]:
    lines = [f"{indent}{mutant.fate} m{mutant.number} {mutant.function} [{mutant.operator}] {mutant.diff}"]
    if mutant.fate == SURVIVED:
        lines.append(f"{indent}  passed: {', '.join(mutant.passed)}")
        lines.append(f"{indent}  suggestion: {mutant.suggestion}")
    elif mutant.reason:
        lines.append(f"{indent}  {mutant.reason}")
    return lines


def markdown(run: MutationRun) -> str:
    """The Markdown report: a table of entries, then each survivor, then the first-kill table and the verdict."""
    lines = ["# Mutation testing", "", _verdict(run).replace("\n", "  \n"), "",
             "| entry | owners | kill rate | " + " | ".join(FATES) + " |",
             "|---|---|---|" + "---|" * len(FATES)]
    for entry in run.entries:
        counts = entry.counts
        lines.append(f"| {entry.name} | {', '.join(entry.owners)} | {_rate(entry.kill_rate)} | "
                     + " | ".join(str(counts[f]) for f in FATES) + " |")
    survivors = [(e, m) for e in run.entries for m in e.mutants if m.fate == SURVIVED]
    if survivors:
        lines += ["", "## Survivors", ""]
        for entry, m in survivors:
            lines += [f"- **{entry.name}** m{m.number} `{m.function}` ({m.operator}): `{m.diff}`",
                      f"  - passed: {', '.join(m.passed)}", f"  - suggestion: {m.suggestion}"]
    noted = [e for e in run.entries if e.notes]
    if noted:
        lines += ["", "## Notes", ""] + [f"- **{e.name}**: {note}" for e in noted for note in e.notes]
    if run.first_kills:
        lines += ["", "## First kills by check", "", "| check | mutants killed first |", "|---|---|"]
        lines += [f"| {check} | {n} |" for check, n in run.first_kills.items()]
    return "\n".join(lines) + "\n"

