"""The layers a network is built from (:mod:`ppl_bnn.model.layers` has how each works).

>>> from ppl_bnn.layers import Conv2d, Dense, Flatten, MaxPool2d
>>> lenet_like = [
...     Conv2d(6, 5, padding="same", activation="relu"), MaxPool2d(2),
...     Conv2d(16, 5, padding="same", activation="relu"), MaxPool2d(2),
...     Flatten(), Dense(84, "relu"), Dense(10),
... ]
"""

from ppl_bnn.model.layers import ACTIVATIONS, AvgPool2d, Conv2d, Dense, Flatten, Layer, MaxPool2d

__all__ = ["ACTIVATIONS", "AvgPool2d", "Conv2d", "Dense", "Flatten", "Layer", "MaxPool2d"]
