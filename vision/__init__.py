"""Chest X-ray image classifiers on reportfed's aggregation core.

* :mod:`vision.models` — MONAI DenseNet121 / ViT split into a representation block and a task block;
* :mod:`vision.data` — image tables (path + label columns in any vocabulary; NIH, CheXpert and
  MIMIC-CXR-JPG layouts), loading, preprocessing and training-side augmentation;
* :mod:`vision.synthetic` — chest-X-ray-like images whose labels are learnable, for tests and CPU runs;
* :mod:`vision.train` — the hyperparameters, local training and prediction (FedAvg, FedBN or
  FedBN+ for the representation block);
* :mod:`vision.node` — the image node algorithm (:class:`reportfed.core.node.NodeAlgorithm`) and the
  ``images`` modality the Flower apps serve;
* :mod:`vision.federation` — federated rounds in this process, the global model, ``ImageLabeler``.

Needs the ``[vision]`` extra (``monai``, ``einops``, ``pillow``). GPU when present, CPU otherwise.
"""
