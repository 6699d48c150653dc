"""What the package's collectives share: the device a small tensor of
theirs lives on, and the agreement of every rank on a flag."""
import sys


def device(group=None):
    """Where a collective over group puts its tensors: the current GPU
    under NCCL, the CPU otherwise."""
    import torch
    import torch.distributed as dist
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return "cpu"


def everyone(ok, group=None):
    """Whether ok holds on every rank (under torch.distributed: all
    ranks call it alike)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return ok
    import torch
    flag = torch.tensor([int(ok)], dtype=torch.int32, device=device(group))
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)
    return bool(flag.item())
