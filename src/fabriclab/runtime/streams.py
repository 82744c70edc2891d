"""The order of the trainer's GPU work across its threads: compute on the main stream, each helper thread's
communication on a CUDA stream of its own, joined by events (as DDP and Horovod overlap them).

On a GPU the host only queues kernels, so "bucket 3's gradients are ready" (the autograd hook ran) is
not yet true on the device. `StreamOrder` closes that gap:

* `grads_ready(b)` (autograd's hook, on the compute stream) records bucket b's event; the helper thread,
  once the host event says the hook ran, makes its stream wait for it (`wait_grads(b)`) before it
  queues the bucket's collective, so communication starts when the GPU has the gradients, and
  backward goes on computing meanwhile.
* `comm_done(b)` records the end of bucket b's communication on the helper's stream and waits for it
  on the host: the helper's span is then the bucket's real communication time, and when the helper's
  job is done the main thread may update (its kernels run after what the host has seen finish).
* `updated()` records the end of the update on the compute stream; a helper returning parameters
  (broadcast, allgather) waits for it first (`wait_updated()`).

On the CPU every method is a no-op (`StreamOrder(None, ...)`): the work is done when the call returns.

Try it: `fabriclab train --device cuda --backend gloo --np 2 --model resnet50 --image-size 32 --steps 5`.
"""

from __future__ import annotations

import torch


class StreamOrder:
    """Streams and events of one trainer; `device` None (or a CPU device) turns it into no-ops."""

    def __init__(self, device: torch.device | None, num_threads: int, num_buckets: int) -> None:
        self.cuda = device is not None and device.type == "cuda" and num_threads > 0
        self.device = device
        if not self.cuda:
            return
        self.streams = [torch.cuda.Stream(device=device) for _ in range(num_threads)]
        self._ready = [torch.cuda.Event() for _ in range(num_buckets)]
        self._recorded = [False] * num_buckets
        self._done = [torch.cuda.Event() for _ in range(num_buckets)]
        self._updated = torch.cuda.Event()

    def thread_start(self, thread: int) -> None:
        """Run first on helper thread `thread`: CUDA's current device and stream are per thread."""
        if self.cuda:
            torch.cuda.set_device(self.device)
            torch.cuda.set_stream(self.streams[thread])

    def new_step(self) -> None:
        if self.cuda:
            self._recorded = [False] * len(self._recorded)

    def grads_ready(self, bucket: int) -> None:
        """Bucket `bucket`'s gradients are queued on the current (compute) stream."""
        if self.cuda:
            self._ready[bucket].record()
            self._recorded[bucket] = True

    def all_grads_ready(self) -> None:
        """After backward: buckets no hook marked (parameters without gradients, zeroed on this stream)."""
        if self.cuda:
            for bucket, done in enumerate(self._recorded):
                if not done:
                    self.grads_ready(bucket)

    def wait_grads(self, bucket: int) -> None:
        """The current (helper) stream waits for bucket `bucket`'s gradients."""
        if self.cuda:
            torch.cuda.current_stream().wait_event(self._ready[bucket])

    def comm_done(self, bucket: int) -> None:
        """Wait on the host until what the current stream queued for `bucket` has run."""
        if self.cuda:
            self._done[bucket].record()
            self._done[bucket].synchronize()

    def updated(self) -> None:
        """The update is queued on the current (compute) stream."""
        if self.cuda:
            self._updated.record()

    def wait_updated(self) -> None:
        """The current (helper) stream waits for the last update."""
        if self.cuda:
            torch.cuda.current_stream().wait_event(self._updated)
