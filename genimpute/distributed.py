"""Data-parallel training with PyTorch's own DistributedDataParallel.

Launched under torchrun (which sets RANK, WORLD_SIZE, LOCAL_RANK and the
rendezvous address), every process builds the same batch from (seed, step)
and trains on its share of the batch rows; DDP averages the gradients, so
the run follows the single-process one up to floating-point summation
order. Only rank 0 writes files and logs progress.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as torch_dist

from genimpute.errors import InputError


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def active(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def rows(self) -> slice:
        """This process's share of a batch's rows."""
        return slice(self.rank, None, self.world)

    def any(self, flag: bool) -> bool:
        """True on every process when `flag` is true on any (keeps them in step)."""
        if not self.active:
            return flag
        t = torch.tensor([int(flag)])
        torch_dist.all_reduce(t, op=torch_dist.ReduceOp.MAX)
        return bool(t.item())

    def total(self, value: float) -> float:
        """Sum of `value` over the processes."""
        if not self.active:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        torch_dist.all_reduce(t)
        return float(t.item())

    def barrier(self) -> None:
        if self.active:
            torch_dist.barrier()

    def device(self, device: torch.device) -> torch.device:
        """One GPU per process on a multi-GPU node."""
        return torch.device("cuda", self.local_rank) if self.active and device.type == "cuda" else device

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        if not self.active:
            return model
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


SINGLE = Distributed()


def start(requested: bool) -> Distributed:
    """The process group of a torchrun launch, or SINGLE. `requested` (the
    --distributed flag) insists on a launch with more than one process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        if requested:
            raise InputError("--distributed: expected a launch by torchrun with more than one process "
                             "(e.g. torchrun --standalone --nproc_per_node 2 -m genimpute train ...); found WORLD_SIZE "
                             f"{os.environ.get('WORLD_SIZE', 'unset')}")
        return SINGLE
    dist = Distributed(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    if not torch_dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(dist.local_rank)
        torch_dist.init_process_group(backend)
    return dist


def stop(dist: Distributed) -> None:
    if dist.active and torch_dist.is_initialized():
        torch_dist.destroy_process_group()
