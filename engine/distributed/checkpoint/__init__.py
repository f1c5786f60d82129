"""``torch.distributed.checkpoint``: tapelab has no sharded (per-rank) checkpoint format; ``save`` and ``load``
refuse, naming what does the job here: ``tapelab.save`` of a state dict gathered on one rank (safetensors
or pickle), and ``model.load_state_dict`` on every rank."""
from __future__ import annotations

from . import hf_storage
from .hf_storage import REFUSAL

__all__ = ["save", "load", "hf_storage"]


def save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None, process_group=None, no_dist=False):
    raise NotImplementedError(REFUSAL)


def load(state_dict, *, checkpoint_id=None, storage_reader=None, planner=None, process_group=None, no_dist=False):
    raise NotImplementedError(REFUSAL)
