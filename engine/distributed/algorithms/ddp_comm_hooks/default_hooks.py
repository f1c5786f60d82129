"""The built-in DDP communication hooks: average a bucket over the group, in full precision or
through a 16-bit copy (``fp16_compress_hook``, ``bf16_compress_hook``) that halves the bytes sent."""
from __future__ import annotations

from .... import _c10d
from ...._c10d.group import resolve
from ....base.dtype import bfloat16, float16

__all__ = ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook"]


def allreduce_hook(process_group, bucket: _c10d.GradBucket) -> _c10d.Future:
    """Average ``bucket.buffer()`` over ``process_group`` (None: the default group), DDP's default."""
    group = resolve(process_group)
    buf = bucket.buffer()
    buf.div_(group.size())
    return _c10d.all_reduce(buf, group=group, async_op=True).get_future().then(lambda fut: fut.value()[0])


def _compressed(process_group, bucket: _c10d.GradBucket, dtype) -> _c10d.Future:
    group = resolve(process_group)
    buf = bucket.buffer()
    small = buf.to(dtype).div_(group.size())

    def decompress(fut):
        buf.copy_(fut.value()[0])     # back to the bucket's dtype
        return buf
    return _c10d.all_reduce(small, group=group, async_op=True).get_future().then(decompress)


def fp16_compress_hook(process_group, bucket: _c10d.GradBucket) -> _c10d.Future:
    """Average a float16 copy of the bucket (half the bytes of float32), then cast back."""
    return _compressed(process_group, bucket, float16)


def bf16_compress_hook(process_group, bucket: _c10d.GradBucket) -> _c10d.Future:
    """Average a bfloat16 copy of the bucket (float32's range, half its bytes), then cast back."""
    return _compressed(process_group, bucket, bfloat16)
