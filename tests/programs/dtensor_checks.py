"""Run under mpiexec with 4 ranks: a 2x2 DeviceMesh, distribute_tensor / DTensor.from_local / full_tensor and
the functional collectives; each rank writes what it holds to OUT/rank{r}.json for tests/test_program_hf_gaps.py
to compare with PyTorch's layout (computed there with torch's own functions)."""
import json
import sys

import numpy as np

import tapelab
import tapelab.distributed as dist
from tapelab.distributed import _functional_collectives as funcol
from tapelab.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from tapelab.distributed.tensor._utils import compute_local_shape_and_global_offset
from tapelab.distributed.tensor.placement_types import _StridedShard

LAYOUTS = {"S0,S1": [Shard(0), Shard(1)], "S1,S1": [Shard(1), Shard(1)], "R,S0": [Replicate(), Shard(0)],
           "SS0,S0": [Shard(0), _StridedShard(0, split_factor=2)]}
GLOBAL = np.arange(7 * 5, dtype=np.float32).reshape(7, 5)


def main(out_dir: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    out = {"coordinate": mesh.get_coordinate(), "tp_ranks": mesh["tp"].mesh.tolist(), "dp_ranks": mesh["dp"].mesh.tolist(),
           "tp_local_rank": mesh.get_local_rank("tp"), "layouts": {}}
    for name, placements in LAYOUTS.items():
        mine = GLOBAL * (rank + 1)      # distribute_tensor takes rank 0's values along each mesh dim by default
        d = distribute_tensor(tapelab.tensor(mine), mesh, placements)
        entry = {"local": d.to_local().tolist(), "shape": list(d.shape),
                 "shape_offset": [list(x) for x in compute_local_shape_and_global_offset((7, 5), mesh, placements)]}
        if name != "SS0,S0":
            entry["full"] = d.full_tensor().tolist()
            entry["from_local_shape"] = list(DTensor.from_local(d.to_local(), mesh, placements).shape)
        out["layouts"][name] = entry
    partial = DTensor.from_local(tapelab.full((2,), float(rank)), mesh, [Partial(), Replicate()])
    out["partial_full"] = partial.full_tensor().tolist()
    x = tapelab.arange(4.0) + 10 * rank
    out["all_reduce"] = funcol.wait_tensor(funcol.all_reduce(x, "sum", mesh["tp"])).tolist()
    out["all_gather"] = funcol.all_gather_tensor(x.reshape(2, 2), 1, (mesh, 1)).tolist()
    src = (tapelab.arange(4.0) + 10 * rank).requires_grad_()
    first = mesh.get_local_rank("tp") == 0      # sends [1, 3] rows / [2, 2]: receives [1, 2] / [3, 2]
    moved = funcol.all_to_all_single_autograd(src, [1, 2] if first else [3, 2], [1, 3] if first else [2, 2],
                                              mesh["tp"].get_group())
    (moved * (tapelab.arange(moved.shape[0]) + 1.0)).sum().backward()
    out["a2a"], out["a2a_grad"] = moved.tolist(), src.grad.tolist()
    with open(f"{out_dir}/rank{rank}.json", "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
