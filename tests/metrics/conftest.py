"""Shared inputs of the classification and reference-posterior metric tests."""

from __future__ import annotations

import numpy as np

# Confidences 0.9, 0.55, 0.7, 0.75; predictions 0, 0, 1, 0; correct: yes, no, yes, yes.
MEAN_PROBS = np.array([[0.9, 0.1], [0.55, 0.45], [0.3, 0.7], [0.75, 0.25]])
LABELS = np.array([0, 1, 1, 0])
