"""The report node algorithm (:mod:`reportfed.reports.node`) and the in-process federation of
report sites (:mod:`reportfed.reports.engine`)."""
