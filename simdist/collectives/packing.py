"""Packing many small tensors into one buffer before a collective, and unpacking after.

A model has many gradient tensors; all-reducing each one pays the latency each time. TF's
``num_packs`` (MirroredStrategy's cross-device ops) and Horovod's tensor fusion concatenate
them into a few large buffers first, so the latency is paid per pack, not per tensor.
"""

from __future__ import annotations

import numpy as np

from simdist.base.errors import InvalidArgumentError
from simdist.sim.payloads import Phantom


def pack(tensors, num_packs: int = 1):
    """Cut the list of tensors into ``num_packs`` groups of consecutive tensors of near-equal
    bytes and concatenate each group into one flat buffer (one dtype per pack)."""
    tensors = list(tensors)
    if not isinstance(num_packs, int) or not 1 <= num_packs <= max(1, len(tensors)):
        raise InvalidArgumentError(f"num_packs={num_packs!r} must be an int between 1 and the "
                                   f"number of tensors ({len(tensors)})")
    sizes = [t.nbytes for t in tensors]
    total = sum(sizes)
    groups, g, filled = [[] for _ in range(num_packs)], 0, 0
    for i, size in enumerate(sizes):
        groups[g].append(i)
        filled += size
        still_empty = num_packs - g - 1  # packs after this one that need tensors
        if still_empty and (filled >= total * (g + 1) / num_packs
                            or len(tensors) - i - 1 == still_empty):
            g += 1
    packs, spec = [], []
    for group in groups:
        members = [tensors[i] for i in group]
        if all(isinstance(t, Phantom) for t in members):
            packs.append(Phantom(sum(t.nbytes for t in members)))
        else:
            dtypes = {t.dtype for t in members}
            if len(dtypes) != 1:
                raise InvalidArgumentError(f"pack: tensors {group} have dtypes "
                                           f"{sorted(map(str, dtypes))}: a pack holds one dtype")
            packs.append(np.concatenate([t.reshape(-1) for t in members]))
        spec.append([(i, getattr(tensors[i], "shape", None), tensors[i].nbytes) for i in group])
    return packs, spec


def unpack(packs, spec):
    """Inverse of ``pack``: the tensors, in their original order and shapes."""
    out = {}
    for buf, group in zip(packs, spec):
        offset = 0
        for i, shape, nbytes in group:
            if isinstance(buf, Phantom):
                out[i] = Phantom(nbytes)
                continue
            count = int(np.prod(shape)) if shape else 1
            out[i] = buf[offset:offset + count].reshape(shape)
            offset += count
    return [out[i] for i in sorted(out)]
