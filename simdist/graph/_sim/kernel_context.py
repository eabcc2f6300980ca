"""Models TF's OpKernelContext: what a kernel may ask of the runtime while it runs."""

from __future__ import annotations

from simdist.base.errors import CancelledError, DeadlineExceededError, OutOfRangeError


def cancelled_kind(op_type: str) -> str:
    """The name TF's kernel gives itself when its wait is cancelled ("Dequeue operation was
    cancelled"): every dequeue and enqueue variant shares one, the accumulators' takes say
    TakeGrad."""
    for kind in ("Dequeue", "Enqueue"):
        if kind in op_type:
            return kind
    return "TakeGrad" if "TakeGradient" in op_type else op_type


class KernelContext:
    """What a kernel may ask of the runtime (TF's OpKernelContext): the resource manager of
    its op's task, and, for a kernel that blocks, the simulation it waits in and the run's
    deadline (``operation_timeout_in_ms``)."""

    def __init__(self, runtime, ctx, deadline: int | None = None):
        self.runtime, self.ctx, self.deadline = runtime, ctx, deadline
        self.pending = None  # (store, request) while the kernel waits on a resource
        self.pending_op = None  # the op whose kernel waits

    @property
    def env(self):
        return self.ctx.env

    def resources(self, op):
        return self.runtime.resources

    def wait(self, store, request, op):
        """Wait for ``request`` (a put or get of ``store``) and return its value; past the
        run's deadline it is withdrawn: TF's DeadlineExceededError. A closed store's errors
        name the op, as TF's do."""
        self.pending, self.pending_op = (store, request), op
        try:
            if self.deadline is not None and not request.triggered:
                timer = self.env.timeout(max(0, self.deadline - self.env.now))
                try:
                    yield self.env.any_of([request, timer])
                finally:
                    timer.cancel()
                if not request.triggered:
                    store.cancel(request, DeadlineExceededError(
                        "Timed out waiting for notification"))
            return (yield request)
        except (OutOfRangeError, CancelledError) as error:
            raise type(error)(f"{error}\n\t [[{{{{node {op.name}}}}}]]") from None
        finally:
            self.pending = self.pending_op = None

    def record_size(self, store):
        """The store's size as a counter in the trace ("queue NAME")."""
        self.ctx.counter(f"queue {store.name}", size=len(store))

    def record(self, lane: str, name: str, **args):
        """An instant in the trace, on ``lane`` of the op's task (e.g. a dropped gradient)."""
        self.ctx.instant(lane, name, "event", **args)
