"""``clip_gradients`` on the parameter servers: Caffe's clipping by the L2 norm of the whole gradient.

Caffe's SGDSolver::ClipGradients scales every learnable param's diff by ``clip_gradients / ||g||``
when ``||g||`` (the L2 norm over all learnable params, taken before the ``iter_size`` normalization)
exceeds ``clip_gradients`` (-1, the default, turns it off). No server holds the whole gradient, so
the servers of a server group agree on the norm of each update first:

1. a server holds the gradient slices of one update (and the answers they would release) until it
   has all of its slices of that update;
2. it sends the sum of their squares (summed in slice order) to the other servers of its group that
   own slices (``CLIPNORM``: ``group`` = the key's group, ``step``, ``server`` = its index ``j``);
3. once it has every such server's sum, it adds them in server order, scales its held slices by
   ``clip / (iter_size * sqrt(sum))`` when that norm is over ``clip``, then applies and answers them.

What one update is: in BSP, step t's mean over the groups (key ``(-1, t)``), so the norm is the one a
single process computes on the global batch; in ASYNC and SSP, one group's gradient of step t (key
``(g, t)``), the norm that group's own single-process solver would compute. The workers push
gradients already divided by ``iter_size``, hence the factor. The sums are added in a fixed order,
so BSP runs stay bit-reproducible.
"""
import math

import numpy as np

BSP_KEY = -1


class ClipGate(object):
    """One server's held updates and the partial squared norms of its group for each update key."""

    def __init__(self, clip, iter_size, n_slices, j, peers):
        self.clip = float(clip)
        self.iter_size = max(1, int(iter_size))
        self.n_slices, self.j = n_slices, j
        self.peers = dict(peers)             # server index in the group -> endpoint
        self.first = min([j] + list(self.peers))
        self.held = {}                        # key -> [(slice key, slice, grad, step, answer)]
        self.partials = {}                    # key -> {server index: sum of squares}

    def hold(self, key, slice_key, item):
        """Hold ``item`` = (slice, grad, step, answer); returns this server's sum of squares of the
        update once all its slices are held (to send to the peers), else None."""
        held = self.held.setdefault(key, [])
        held.append((slice_key,) + tuple(item))
        if len(held) < self.n_slices:
            return None
        held.sort(key=lambda x: x[0])
        own = 0.0
        for _, _, grad, _, _ in held:
            own += float(np.dot(grad, grad))
        self.partials.setdefault(key, {})[self.j] = own
        return own

    def add_partial(self, key, j, value):
        self.partials.setdefault(key, {})[j] = float(value)

    def ready(self, key):
        """``(l2norm, scale or None, [(slice, grad, step, answer)])`` once the update's norm is known
        (scale None: under the threshold), else None."""
        parts = self.partials.get(key, {})
        if len(parts) < 1 + len(self.peers) or self.j not in parts:
            return None
        del self.partials[key]
        held = self.held.pop(key)
        total = 0.0
        for j in sorted(parts):
            total += parts[j]
        l2 = math.sqrt(total) * self.iter_size
        scale = self.clip / l2 if l2 > self.clip else None
        return l2, scale, [x[1:] for x in held]
