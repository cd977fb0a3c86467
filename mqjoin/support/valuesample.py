"""A consistent sample of join values: a value is in the sample of a fraction ``F`` when its
hash falls below ``F``, the same in every relation, so agreeing tuples are sampled together
(correlated sampling).  A join result survives exactly when its value does, with probability
``F``, and a count over the sample divided by ``F`` is unbiased.  The adaptive controller
counts agreeing pairs this way (:mod:`mqjoin.adaptive.sampling`) and ``mqjoin stats --sizes``
join sizes (:mod:`mqjoin.datasets.sizes`).

Integers hash by Knuth's multiplicative hash (consecutive keys spread evenly), other values by
CRC-32 of their ``repr``; an integral float hashes as its integer (``1 == 1.0`` agree).

>>> sampled(7, 1.0), sampled(7, 0.5) == sampled(7.0, 0.5)
(True, True)
>>> import numpy as np
>>> v = np.arange(-50, 1000)
>>> sampled_mask(v, 0.3).tolist() == [sampled(int(x), 0.3) for x in v]
True
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np


def sampled(value: Any, fraction: float) -> bool:
    """Whether a join value is in the hash sample of ``fraction`` (equal values — ``1`` and
    ``1.0`` — are sampled alike in every relation)."""
    if fraction >= 1:
        return True
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    h = zlib.crc32(repr(value).encode("utf-8")) if not isinstance(value, int) else (value * 2654435761) & 0xFFFFFFFF
    return (h & 0xFFFFFF) < fraction * 0x1000000


def sampled_mask(values: np.ndarray, fraction: float) -> np.ndarray:
    """:func:`sampled` of every value of a column (vectorised for integer columns; nulls and
    NaN are never sampled)."""
    if fraction >= 1:
        return np.ones(len(values), dtype=bool)
    if values.dtype.kind in "iu":
        h = (values.astype(np.uint64) * np.uint64(2654435761)) & np.uint64(0xFFFFFF)
        return h < fraction * 0x1000000
    return np.fromiter((v is not None and v == v and sampled(v, fraction) for v in values.tolist()),
                       dtype=bool, count=len(values))
