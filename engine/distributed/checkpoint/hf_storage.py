"""``torch.distributed.checkpoint.hf_storage``: the Hugging Face (safetensors) readers and writers of a
distributed checkpoint, which tapelab does not have (see ``tapelab.distributed.checkpoint``)."""
from __future__ import annotations

__all__ = ["HuggingFaceStorageReader", "HuggingFaceStorageWriter"]

REFUSAL = ("tapelab has no distributed (sharded) checkpoint format; save the state dict from one rank with "
            "tapelab.save (safetensors) and load it on every rank with load_state_dict")


class HuggingFaceStorageReader:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(REFUSAL)


class HuggingFaceStorageWriter:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(REFUSAL)
