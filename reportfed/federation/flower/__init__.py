"""Federation across processes on Flower (``flwr`` Message API).

* :mod:`~reportfed.federation.flower.strategy` — :class:`SurgicalAggregation`, a Flower
  ``Strategy`` whose server step is :func:`reportfed.aggregation.aggregate`;
* :mod:`~reportfed.federation.flower.server_app` / :mod:`~reportfed.federation.flower.client_app` —
  the ``ServerApp`` and ``ClientApp`` (the Flower app descriptor lives in ``app/pyproject.toml``);
* :mod:`~reportfed.federation.flower.site` — what a node reads from its own disk;
* :mod:`~reportfed.federation.flower.launch` — the processes behind ``reportfed federation ...``.

Importing this package needs the ``[flower]`` extra.
"""
