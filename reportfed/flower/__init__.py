"""Federation across processes on Flower (``flwr`` Message API).

* :mod:`~reportfed.flower.strategy` — :class:`SurgicalAggregation`, a Flower
  ``Strategy`` whose server step is :func:`reportfed.core.aggregation.aggregate`;
* :mod:`~reportfed.flower.server_app` / :mod:`~reportfed.flower.client_app` —
  the ``ServerApp`` and ``ClientApp`` (the Flower app descriptor lives in ``app/pyproject.toml``);
* :mod:`~reportfed.flower.modalities` — the kinds of node a run serves (entry points) and the
  hyperparameters a run config gives them;
* :mod:`~reportfed.flower.registry` / :mod:`~reportfed.flower.wire` — who is admitted, and the
  records messages carry;
* :mod:`~reportfed.flower.launch` — the processes behind ``reportfed federation ...``.

The modules that speak Flower's Message API (strategy, apps, registry, wire, secure rounds)
need the ``[flower]`` extra; the package itself and the modules around the processes
(``launch``, ``gateway``, ``guard``, ``warm``) import without it; the run's record is
:class:`reportfed.core.record.RunHistory`, which both engines write. The run report
(:mod:`reportfed.pages.run_report`) needs no Flower.
"""
