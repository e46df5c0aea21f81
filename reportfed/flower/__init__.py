"""Federation across processes on Flower (``flwr`` Message API).

* :mod:`~reportfed.flower.strategy` — :class:`SurgicalAggregation`, a Flower
  ``Strategy`` whose server step is :func:`reportfed.core.aggregation.aggregate`;
* :mod:`~reportfed.flower.server_app` / :mod:`~reportfed.flower.client_app` —
  the ``ServerApp`` and ``ClientApp`` (the Flower app descriptor lives in ``app/pyproject.toml``);
* :mod:`~reportfed.flower.site` — what a node reads from its own disk;
* :mod:`~reportfed.flower.launch` — the processes behind ``reportfed federation ...``.

Importing this package needs the ``[flower]`` extra.
"""
