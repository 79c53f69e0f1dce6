"""Whether ``--gpu`` agrees with the device a file records (its name, its SM count).

An H100 SXM and an H200 have the same 132 SMs and compute capability 9.0: the SM count alone does not tell
them apart, the device name does (their memory too: 80 GiB against 141). A file judged as another GPU gets that
GPU's roofs, so a contradiction is refused unless the user insists (``--force-gpu``: a MIG slice, a renamed
part).
"""

from __future__ import annotations

from hroofline.errors import InputError
from hroofline.roofs.catalog import MEMORY_TOLERANCE, GpuName, gpu_from_display_name


def check_named_gpu(
    where: str,
    device_name: str | None,
    sms: int | None,
    named: GpuName,
    force_gpu: bool,
    memory_bytes: float | None = None,
) -> None:
    """Refuses ``named`` where the file's device (``device_name``, ``sms``, ``memory_bytes``) is another GPU,
    unless ``force_gpu``."""
    if force_gpu:
        return
    device = f" ({device_name})" if device_name else ""
    insist = f"leave out --gpu (the file says which GPU it is), or add --force-gpu to judge it as {named.name} anyway"
    if sms is not None and named.sms is not None and sms != named.sms:
        raise InputError(
            f"{where}: the profiled device{device} has {sms} SMs, --gpu {named.name} has {named.sms}", insist
        )
    stated = gpu_from_display_name(device_name) if device_name else None
    if stated is not None and stated.name != named.name:
        raise InputError(
            f"{where}: the profiled device is {device_name} ({stated.name} in the catalog), not --gpu {named.name}",
            insist,
        )
    sold = [size for size in (named.memory_bytes, *named.memory_by_alias.values()) if size]
    if memory_bytes and sold and not any(abs(memory_bytes / size - 1) <= MEMORY_TOLERANCE for size in sold):
        raise InputError(
            f"{where}: the profiled device{device} has {memory_bytes / 2**30:.0f} GiB of memory, --gpu {named.name} "
            f"has {' or '.join(f'{size / 2**30:.0f}' for size in sold)} GiB",
            insist,
        )
