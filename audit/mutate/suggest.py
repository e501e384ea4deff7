"""What a survivor says about its entry: from where the equivalence probe saw it differ, the one change to the
registration that would let the claimed checks see it, or a blind spot of the checks."""

from __future__ import annotations

from audit.registry.model import Entry

#: A change smaller than this (relative) is below what central differences resolve at the audit's tolerances.
BELOW_DIFFERENCES = 1e-2


def suggestion(entry: Entry, differs: dict) -> str:
    """The suggestion for a survivor of ``entry`` whose probe found ``differs`` (input set -> the first quantity
    that differs there, by how much, on which case)."""
    registered = differs.get("registered")
    if registered is None:
        if "mirrored domain" in differs:
            return ("it differs only outside the registered `domain` (on the domain mirrored about 0): widen "
                    "`domain` where the target is used there")
        if "wider dims" in differs:
            return ("it differs only for dims above the registered ranges (up to 17): widen `dims` to reach the "
                    "sizes where the code takes another path (a tile remainder, a broadcast)")
        if "other values" in differs:
            return ("it differs only for other values of the entry's fixed `value:` inputs (x1.5): register a "
                    "second entry with another value")
        return "no difference was located: check it by hand"
    quantity, relative = registered["quantity"], registered["relative"]
    if quantity == "second order" and not entry.supports.double_backward:
        return ("it differs only at second order: claim `supports.double_backward` so that gradgradcheck judges it "
                "(where the original's second derivative is defined: a second entry on a smaller domain if not)")
    if quantity == "tangent" and not entry.supports.forward_ad:
        return "it differs only in forward mode: claim `supports.forward_ad` so that forward_ad judges it"
    if quantity == "output" and not entry.reference:
        return "its outputs differ and no `reference` judges outputs: add a `reference`"
    if relative < BELOW_DIFFERENCES and not entry.reference:
        return (f"its change ({relative:.2g} relative) is below finite differences' resolution: add a `reference` "
                "(compared in float64 at 1e-9)")
    if relative < BELOW_DIFFERENCES:
        return (f"its change ({relative:.2g} relative) is within the tolerance the checks allow: tighten "
                "`tolerance` if it matters")
    return (f"a blind spot: the claimed checks passed a change of {relative:.2g} (relative) in the {quantity}; "
            "report it with the mutant's diff")
