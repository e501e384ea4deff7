"""The bottom layer: the contract's fixed formats (:mod:`audit.core.contract`), the errors every layer raises, the
verdict exceptions a check raises (:mod:`audit.core.violation`), file writing, stack frames and the names of
replay scripts. Nothing here imports torch or any other part of the audit but the replay kit (:mod:`audit.kit`)."""
