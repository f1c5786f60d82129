"""Write engine/vision/models/_weights_meta.json: torchvision's classification weights as data.

Run with torchvision installed (``/work/tvenv/bin/python scripts/gen_vision_weights_meta.py``,
from a directory other than /tmp). Records, per ``<Model>_Weights`` enum: each member's url,
transform preset parameters and meta (the ImageNet category list is stored once), the DEFAULT
alias, and which builders take it, so tapelab rebuilds the enums without torchvision.
"""
from __future__ import annotations

import inspect
import json
import pathlib
import sys
import typing

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "engine" / "vision" / "models" / "_weights_meta.json"
FIXTURE = ROOT / "tests" / "fixtures" / "vision" / "weights_presets.npz"
KEYS = ROOT / "tests" / "fixtures" / "vision" / "weights_state_keys.json"


def _preset(transforms) -> dict:
    """The ImageClassification preset's parameters (``functools.partial`` keywords)."""
    kw = dict(transforms.keywords)
    for key in ("crop_size", "resize_size"):
        if key in kw and not isinstance(kw[key], int):
            kw[key] = list(kw[key])
    if "interpolation" in kw:
        kw["interpolation"] = kw["interpolation"].name
    for key in ("mean", "std"):
        if key in kw:
            kw[key] = list(kw[key])
    return {"name": transforms.func.__name__, **kw}


def _weights_class(builder) -> type | None:
    hints = typing.get_type_hints(builder)
    for arg in typing.get_args(hints.get("weights")):
        if inspect.isclass(arg) and arg.__name__.endswith("_Weights"):
            return arg
    return None


def main() -> None:
    from torchvision import models
    from torchvision.models import _api

    categories = None
    enums: dict[str, dict] = {}
    for name in models.list_models(module=models):
        cls = _weights_class(models.get_model_builder(name))
        if cls is None:
            continue
        entry = enums.setdefault(cls.__name__, {"builders": [], "members": {}})
        entry["builders"].append(name)
        for member in cls:
            meta = dict(member.value.meta)
            if meta.get("categories") is not None:
                if categories is None:
                    categories = meta["categories"]
                assert meta["categories"] == categories, (cls.__name__, member.name)
                meta["categories"] = "IMAGENET1K"
            entry["members"][member.name] = {"url": member.value.url, "transforms": _preset(member.value.transforms),
                                             "meta": meta}
        entry["DEFAULT"] = cls.DEFAULT.name
    data = {"torchvision": __import__("torchvision").__version__, "categories": {"IMAGENET1K": categories},
            "enums": dict(sorted(enums.items()))}
    assert _api.get_weight  # the API these names come from
    OUT.write_text(json.dumps(data, separators=(",", ":"), sort_keys=False) + "\n")
    print(f"{OUT}: {len(enums)} enums, {sum(len(e['members']) for e in enums.values())} weights", file=sys.stderr)


def presets_fixture() -> None:
    """torchvision's ImageClassification preset on a fixed uint8 image, for tests/test_vision_weights_api.py."""
    import numpy as np
    import torch
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms._presets import ImageClassification

    image = np.random.default_rng(0).integers(0, 256, (3, 40, 50), dtype=np.uint8)
    out = {"image": image}
    for mode in ("BILINEAR", "BICUBIC"):
        preset = ImageClassification(crop_size=16, resize_size=20, interpolation=InterpolationMode[mode])
        out[mode] = preset(torch.from_numpy(image)).numpy()
    np.savez_compressed(FIXTURE, **out)
    print(f"{FIXTURE}: {sorted(out)}", file=sys.stderr)


def state_key_digest(state: dict) -> str:
    """SHA-1 of a state_dict's ``key:shape`` lines in order: what a checkpoint needs of a model."""
    import hashlib

    lines = "\n".join(f"{k}:{tuple(v.shape)}" for k, v in state.items())
    return hashlib.sha1(lines.encode()).hexdigest()


def state_keys_fixture() -> None:
    """Each weighted builder's state_dict layout as loaded (1000 classes, the default member's input size)."""
    import torch
    from torchvision import models

    digests = {}
    for name in models.list_models(module=models):
        cls = _weights_class(models.get_model_builder(name))
        if cls is None:
            continue
        kwargs = {"image_size": cls.DEFAULT.meta["min_size"][0]} if name.startswith("vit_") else {}
        try:
            with torch.device("meta"):
                model = models.get_model(name, **kwargs)
        except NotImplementedError:   # a builder that reads values while building (swin, maxvit)
            model = models.get_model(name, **kwargs)
        digests[name] = state_key_digest(model.state_dict())
    KEYS.write_text(json.dumps(digests, indent=0, sort_keys=True) + "\n")
    print(f"{KEYS}: {len(digests)} builders", file=sys.stderr)


if __name__ == "__main__":
    main()
    presets_fixture()
    state_keys_fixture()
