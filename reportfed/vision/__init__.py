"""Chest X-ray image classifiers on reportfed's aggregation core (the ``[vision]`` extra:
``monai``, ``einops``, ``pillow``; GPU when present, CPU otherwise).

The public names below are imported from ``reportfed.vision`` itself, loaded on first use:
image tables (path + label columns in any vocabulary; NIH, CheXpert and MIMIC-CXR-JPG layouts),
MONAI DenseNet121 / ViT split into a representation block and a task block, federated rounds in
this process (FedAvg, FedBN or FedBN+ for the representation block), the global model and its
``ImageLabeler``, and synthetic chest-X-ray-like images for trials. The modules are internal:
``data``, ``models``, ``train``, ``node`` (the ``images`` modality the Flower apps serve),
``federation``, ``synthetic``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reportfed.core.public import lazy_names

#: each public name and the internal module that defines it
_PUBLIC = {
    "ImageTable": "reportfed.vision.data",
    "read_image_table": "reportfed.vision.data",
    "table_from_report_labels": "reportfed.vision.data",
    "build_model": "reportfed.vision.models",
    "ImageFederationConfig": "reportfed.vision.train",
    "predict_images": "reportfed.vision.train",
    "ImageNode": "reportfed.vision.node",
    "run_image_federation": "reportfed.vision.federation",
    "global_image_model": "reportfed.vision.federation",
    "ImageLabeler": "reportfed.vision.federation",
    "write_synthetic_node": "reportfed.vision.synthetic",
}

__all__ = list(_PUBLIC)

__getattr__, __dir__ = lazy_names(__name__, _PUBLIC, globals())

if TYPE_CHECKING:  # what type checkers and IDEs see (``X as X``: a re-export)
    from reportfed.vision.data import ImageTable as ImageTable
    from reportfed.vision.data import read_image_table as read_image_table
    from reportfed.vision.data import table_from_report_labels as table_from_report_labels
    from reportfed.vision.federation import ImageLabeler as ImageLabeler
    from reportfed.vision.federation import global_image_model as global_image_model
    from reportfed.vision.federation import run_image_federation as run_image_federation
    from reportfed.vision.models import build_model as build_model
    from reportfed.vision.node import ImageNode as ImageNode
    from reportfed.vision.synthetic import write_synthetic_node as write_synthetic_node
    from reportfed.vision.train import ImageFederationConfig as ImageFederationConfig
    from reportfed.vision.train import predict_images as predict_images
