"""The replay kit: every helper a check's property and its replay script use, in plain torch.

Its modules import nothing but torch, the standard library and each other, so that a replay script can carry the
definitions it reaches (:func:`audit.engine.script.kit_source` joins the modules in :data:`MODULES` order, their
imports of each other dropped) and still need nothing but torch and the target's package. The audit's checks call
these same functions: what a script prints is what the cell found, computed by the same code. A check's property
is one function of this shape::

    def property(fn, ref, args, *, seed, tol, ...) -> list[str]   # [] when it holds

where ``fn`` is the target called as the audit calls it (:func:`audit.kit.calls.guarded`), ``ref`` the reference
(or None) and ``args`` the case's arguments. Each name is imported from the module that defines it; a test holds
every module to torch and the kit alone, and no name is defined twice.
"""

#: The kit's modules, each after those it imports: the order a replay script carries their definitions in.
MODULES = ("tolerance", "refusal", "tensors", "compiled", "autograd", "compare", "calls", "sparse", "precision",
           "noise", "jacobians", "explain", "models", "ddp", "proxy")
