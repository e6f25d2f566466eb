"""Data parallelism with DistributedDataParallel (also the base of ZeRO-1)."""

from torch.nn.parallel import DistributedDataParallel


def apply(model, dims, device):
    ids = [device.index] if device.type != "cpu" else None
    return DistributedDataParallel(model, device_ids=ids, process_group=dims.dp_mesh.get_group())
