"""``audit mutate``: how strong each entry's audit is, measured by the planted gradient bugs its claimed checks
catch. :mod:`~audit.mutate.operators` rewrites one function's syntax tree, one change per mutant;
:mod:`~audit.mutate.sources` finds the functions of an entry that are Python source; :mod:`~audit.mutate.engine`
runs each mutant's claimed cells in the audit's workers; :mod:`~audit.mutate.results` holds what came of them."""
