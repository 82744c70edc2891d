"""The trainer's configuration: how gradients are aggregated, bucketed, compressed and overlapped, and
where and in which precision the model computes.

Try it: `fabriclab train --sync ps:servers=2 --overlap forward` (one error line: forward overlap needs reduce sync).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabriclab.collectives.matching import DEFAULT_SEGMENT_BYTES
from fabriclab.runtime.buckets import SGDConfig
from fabriclab.runtime.environment import DEVICES
from fabriclab.runtime.precision import check_precision
from fabriclab.runtime.sync import COMPRESSIONS, SyncSpec
from fabriclab.whatif.fusion import MIB, POLICIES, FusionPolicy

OVERLAPS = ("none", "forward", "backward")


@dataclass(frozen=True, kw_only=True)
class TrainerConfig:
    """How gradients are aggregated and overlapped."""

    sync: str = "allreduce:native"
    """allreduce:ALGO, reduce:ALGO (ALGO a schedule spec or native), sharded:ALGO or ps:servers=K."""
    overlap: str = "backward"
    """none (SC-B), forward (SC-OB, reduce and sharded sync) or backward (SC-OBR, DDP, Horovod)."""
    fusion: str = "ddp"
    """Bucket policy of `whatif.fusion`: ddp (sizes), horovod (cycle time + size), time-or-size or none."""
    bucket_bytes: int = 25 * MIB
    """Bucket cap (ddp), fusion threshold (horovod) or buffer size (time-or-size); DDP's default 25 MiB."""
    first_bucket_bytes: int = 1 * MIB
    """Cap of the first bucket (ddp), so communication starts early; DDP's default 1 MiB."""
    cycle_time_s: float = 1e-3
    """Horovod's cycle time (HOROVOD_CYCLE_TIME, 1 ms) and time-or-size's timeout (Zhang et al.)."""
    compression: str = "none"
    """Gradients on the wire: none, fp16 or bf16."""
    sgd: SGDConfig = field(default_factory=SGDConfig)
    """Optimizer settings."""
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    """Message size the schedule executor cuts chunks into on CPU."""
    timeout_s: float = 60.0
    """Longest wait for communication before a step fails."""
    comm_threads: int = 2
    """Helper threads, each with a process group of its own; bucket i goes to thread i mod k, so k
    buckets are in flight at once (Gloo's process group also runs 2 collectives at a time by default).
    Under NCCL the trainer uses one: NCCL queues buckets on the GPU without blocking the thread."""
    device: str = "cpu"
    """Where the model and its buckets live: cpu, or cuda (the rank's current GPU, which the launcher
    sets to the GPU of its local rank)."""
    precision: str = "fp32"
    """fp32, bf16 (autocast) or fp16 (autocast and a dynamic loss scale); parameters and updates stay fp32."""
    channels_last: bool = False
    """Convolution weights and image batches in channels-last (NHWC) order."""

    def __post_init__(self) -> None:
        spec = SyncSpec.parse(self.sync)
        if self.overlap not in OVERLAPS:
            raise ValueError(f"unknown overlap {self.overlap!r}: use one of {', '.join(OVERLAPS)}")
        if self.overlap == "forward" and spec.kind not in ("reduce", "sharded"):
            raise ValueError(f"--overlap forward overlaps the return of the updated parameters with the "
                             f"forward pass, which only reduce and sharded sync have: use --sync reduce:ALGO "
                             f"or sharded:ALGO, or --overlap backward with {spec.kind}")
        if self.fusion not in POLICIES:
            raise ValueError(f"unknown fusion {self.fusion!r}: use one of {', '.join(POLICIES)}")
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"unknown compression {self.compression!r}: use one of {', '.join(COMPRESSIONS)}")
        if not 1 <= self.comm_threads <= 16:
            raise ValueError(f"--comm-threads must be 1..16, got {self.comm_threads}")
        if self.bucket_bytes < 1 or self.first_bucket_bytes < 1 or not self.cycle_time_s > 0:
            raise ValueError("bucket sizes must be >= 1 byte and the cycle time > 0")
        if self.device not in DEVICES:
            raise ValueError(f"unknown device {self.device!r}: use {' or '.join(DEVICES)}")
        check_precision(self.precision)

    @property
    def compute_options(self) -> dict:
        """Device, precision and layout, as `runtime.ddp.DDPRunner` takes them (the peer computes alike)."""
        return {"device": self.device, "precision": self.precision, "channels_last": self.channels_last}

    @property
    def policy(self) -> FusionPolicy:
        return FusionPolicy(name=self.fusion, bucket_bytes=self.bucket_bytes,
                            first_bucket_bytes=self.first_bucket_bytes, fusion_threshold_bytes=self.bucket_bytes,
                            buffer_bytes=self.bucket_bytes, cycle_time_s=self.cycle_time_s,
                            timeout_s=self.cycle_time_s)
