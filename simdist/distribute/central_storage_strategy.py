"""``tf.distribute.experimental.CentralStorageStrategy`` on a simulated task: the variables
once on the host CPU, compute on the task's devices (TF's ``central_storage_strategy.py``).
"""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError
from simdist.collectives import ReduceOp
from simdist.distribute.strategy import Strategy, _flatten, _walk
from simdist.distribute.values import Mirrored, MirroredVariable
from simdist.sim.context import HOST
from simdist.sim.payloads import Phantom


class CentralStorageStrategy(Strategy):
    """``tf.distribute.experimental.CentralStorageStrategy``: the variables live once, on the
    host CPU; every step each replica device reads them from the host and sends its gradient
    back, and the host adds the gradients and updates the variables. The bytes crossing the
    host link per step, 2 x replicas x model bytes, show in the trace."""

    step_costs = ("input_pipeline_overhead_ns",)  # a DistributedDataset

    @property
    def _central(self) -> bool:
        """With one device TF keeps the variables on it: nothing goes through the host."""
        return len(self._devices) > 1

    def variables(self, initial):
        if not self._in_scope:
            raise InvalidArgumentError("create variables inside `with strategy.scope():` so "
                                       "that CentralStorageStrategy can place them")
        if not self._central:
            return super().variables(initial)
        return {name: MirroredVariable(name, [value], [f"{self.ctx.device(0).rsplit('/', 1)[0]}"
                                                       f"/device:CPU:0 ({HOST})"])
                for name, value in initial.items()}

    def run(self, fn, args=(), kwargs=None, flops=0.0, nbytes=0, name="step", ops=0,
            time_factor=1.0):
        if self._central:
            variables = [a for a in _walk(args) if isinstance(a, MirroredVariable)]
            size = sum(v.numpy().nbytes for v in variables)
            yield from self._host_to_devices(size, "read variables")
        return (yield from super().run(fn, args, kwargs, flops, nbytes, name, ops,
                                       time_factor))

    def _host_to_devices(self, nbytes, tag):
        recvs = []
        for device in self._devices:
            self.ctx.send(self.ctx.task, tag, Phantom(nbytes), device=None, dst_device=device)
            recvs.append(self.ctx.recv(self.ctx.task, tag, src_device=None, device=device))
        yield self.ctx.env.all_of(recvs)

    def batch_reduce_to(self, op, values):
        """The replicas' gradients go to the host, which reduces them (and keeps the one
        result: every replica reads the variables from the host next step)."""
        if not self._central:
            return (yield from super().batch_reduce_to(op, values))
        op = ReduceOp.parse(op)
        flat, rebuild = _flatten(values)
        tag = f"gradients#{self.ctx.next_instance('central-storage')}"
        for r, device in enumerate(self._devices):
            self.ctx.send(self.ctx.task, tag, [v.values[r] for v in flat], device=device,
                          dst_device=None)
        got = []
        for device in self._devices:
            msg = yield self.ctx.recv(self.ctx.task, tag, src_device=device, device=None)
            got.append(msg.payload)
        out = []
        for i in range(len(flat)):
            acc = got[0][i]
            for g in got[1:]:
                acc = op.combine(acc, g[i])
            out.append(Mirrored([op.finalize(acc, len(got))]))
        return rebuild(out)

    def update(self, variables, grads, fn, name="update"):
        """The host updates the one copy of each variable."""
        if not self._central:
            yield from super().update(variables, grads, fn, name)
            return
        nbytes = flops = 0
        for k, var in variables.items():
            var.assign_each([fn(var.values[0], grads[k].values[0])])
            nbytes += 3 * var.values[0].nbytes
            flops += 2 * var.values[0].size
        duration = self.ctx.hardware.device.compute_time_ns(flops, nbytes, ops=len(variables))
        start = self.ctx.occupy(HOST, duration)
        self.ctx.span(HOST, name, "compute", start, duration, flops=flops)
        yield self.ctx.timeout(start + duration - self.ctx.now)
