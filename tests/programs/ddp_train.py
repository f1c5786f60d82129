"""A PyTorch DDP training script in the common pattern, unchanged but for its one import of the
library (``import tapelab as torch``; everything else is reached through ``torch.``):
``init_process_group`` reading torchrun's environment, a ``DistributedSampler`` sharding a
``TensorDataset``, ``DistributedDataParallel`` around an MLP, ``set_epoch`` each epoch, rank 0
saving the result. Run: ``python -m tapelab.distributed.run --nproc-per-node 4 ddp_train.py OUT``.
"""
import os
import sys

import numpy as np

import tapelab as torch

dist = torch.distributed
DDP = torch.nn.parallel.DistributedDataParallel
DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset
DistributedSampler = torch.utils.data.distributed.DistributedSampler


def main(out_dir: str, epochs: int = 2, batch_size: int = 4) -> None:
    dist.init_process_group(backend="gloo", init_method="env://")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    assert local_rank == rank and int(os.environ["WORLD_SIZE"]) == world_size

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = (x @ rng.standard_normal((8, 1)).astype(np.float32)).astype(np.float32)
    dataset = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    sampler = DistributedSampler(dataset, shuffle=False)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(rng.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    loss_fn = torch.nn.MSELoss()

    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(ddp(xb), yb)
            loss.backward()
            opt.step()
        losses = [None] * world_size
        dist.all_gather_object(losses, loss.item())
        if rank == 0:
            print(f"epoch {epoch}: loss {sum(losses) / world_size:.4f}", flush=True)

    if rank == 0:
        np.savez(os.path.join(out_dir, "trained.npz"), *[p.detach().numpy() for p in model.parameters()])
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
