"""Write the reference fixtures of tapelab.vision's tests from torchvision itself.

torchvision cannot be imported beside the main venv's torch, so this runs in a separate venv:

    python3.11 -m venv /work/tvenv
    /work/tvenv/bin/pip install torch==2.14.1 torchvision==0.29.1 pillow numpy
    /work/tvenv/bin/python scripts/vision_references.py [models|models_extra|transforms|transforms_v2|ops_extra|programs ...]

It writes tests/fixtures/vision/: ``transforms.npz`` (every case of tests/vision_cases.py), ``transforms_v2.npz`` (tests/vision_cases_v2.py),
``models.npz`` (per model: state_dict keys and shapes, parameter counts, and the logits and gradients
of a small input with the seeded weights of tests/vision_weights.py), ``squeezenet1_1_fp16.pt``
(a state_dict written by torch.save), ``models_extra.npz`` (the same for the later families, with
fewer gradient values), ``ops_extra.npz`` (tests/vision_cases.py's extra_ops_cases) and
``programs.npz`` (the numbers tests/programs/vision/*.py return under real torch and torchvision).
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import torch
import torchvision

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "vision"
sys.path.insert(0, str(ROOT / "tests"))

from vision_cases import (EXTRA_AUX, EXTRA_CLASS_NUMERIC, EXTRA_GRAD_SAMPLE, EXTRA_INPUT_STRIDE,  # noqa: E402
                          EXTRA_NUMERIC, EXTRA_PARAM_GRADS, EXTRA_SIZES, as_array, aux_outputs, extra_ops_cases,
                          model_outputs, ops_cases, param_grads, transform_cases, utils_cases)
from vision_weights import seeded_input, seeded_state  # noqa: E402

# builder name -> (keyword arguments for the numeric check, input shape)
MODELS = {
    "resnet18": ({}, (1, 3, 64, 64)),
    "resnet34": ({}, (1, 3, 64, 64)),
    "resnet50": ({}, (1, 3, 64, 64)),
    "vgg11": ({}, (1, 3, 64, 64)),
    "vgg11_bn": ({}, (1, 3, 64, 64)),
    "vgg16": ({}, (1, 3, 64, 64)),
    "vgg16_bn": ({}, (1, 3, 64, 64)),
    "mobilenet_v2": ({}, (1, 3, 64, 64)),
    "alexnet": ({}, (1, 3, 64, 64)),
    "squeezenet1_1": ({}, (1, 3, 64, 64)),
    "densenet121": ({}, (1, 3, 64, 64)),
    "vit_b_16": ({"image_size": 32}, (1, 3, 32, 32)),
}
NUM_CLASSES = 10



def shapes_of(model) -> dict:
    return {k: (tuple(v.shape), not v.is_floating_point()) for k, v in model.state_dict().items()}


def models() -> None:
    arrays: dict[str, np.ndarray] = {}
    for name, (kwargs, shape) in MODELS.items():
        builder = getattr(torchvision.models, name)
        with torch.device("meta"):
            full = builder()                                   # the published configuration
        arrays[f"{name}/keys"] = np.array(list(full.state_dict()))
        arrays[f"{name}/shapes"] = np.array([",".join(map(str, v.shape)) for v in full.state_dict().values()])
        arrays[f"{name}/num_params"] = np.array(sum(p.numel() for p in full.parameters()))
        model = builder(num_classes=NUM_CLASSES, **kwargs)
        state = seeded_state(shapes_of(model))
        model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
        for k, v in model_outputs(torch, model, seeded_input(shape)).items():
            arrays[f"{name}/{k}"] = v
        if name == "resnet18":   # batch statistics in train mode, on a batch of two
            for k, v in model_outputs(torch, model, seeded_input((2, 3, 64, 64), seed=99), train=True).items():
                arrays[f"{name}_train/{k}"] = v
        print(name, "ok", flush=True)
    np.savez_compressed(OUT / "models.npz", **arrays)
    checkpoint()


def load_seeded(model) -> None:
    """The seeded weights copied in place (MNASNet refuses a state_dict without its version metadata)."""
    state = model.state_dict()
    with torch.no_grad():
        for k, v in seeded_state(shapes_of(model)).items():
            state[k].copy_(torch.from_numpy(v))


def models_extra() -> None:
    """Keys, shapes and sizes of the later families; logits and gradients of their smallest members."""
    arrays: dict[str, np.ndarray] = {}
    path = OUT / "models_extra.npz"
    stored = dict(np.load(path)) if path.exists() else {}
    for name, kwargs in EXTRA_SIZES.items():
        if f"{name}/num_params" in stored:   # sizes do not change; regnet_y_128gf takes minutes to build
            arrays |= {f"{name}/{k}": stored[f"{name}/{k}"] for k in ("keys", "shapes", "num_params")}
            continue
        # torchvision's RegNet computes its widths with tensors, which fails on meta: those build on the CPU
        with torch.device("cpu" if name.startswith("regnet") else "meta"):
            full = torchvision.models.get_model(name, **kwargs)
        arrays[f"{name}/keys"] = np.array(list(full.state_dict()))
        arrays[f"{name}/shapes"] = np.array([",".join(map(str, v.shape)) for v in full.state_dict().values()])
        arrays[f"{name}/num_params"] = np.array(sum(p.numel() for p in full.parameters()))
    for name, (kwargs, shape, train) in EXTRA_NUMERIC.items():
        model = torchvision.models.get_model(name, num_classes=NUM_CLASSES, **kwargs)
        load_seeded(model)
        for mode in (False, True) if train else (False,):
            prefix = f"{name}_train" if mode else name
            outputs = model_outputs(torch, model, seeded_input(shape), train=mode, grad_sample=EXTRA_GRAD_SAMPLE,
                                    input_stride=EXTRA_INPUT_STRIDE)
            arrays |= {f"{prefix}/{k}": v for k, v in outputs.items()}
            if not mode and name in EXTRA_PARAM_GRADS:
                arrays |= {f"{prefix}/{k}": v
                           for k, v in param_grads(model, EXTRA_PARAM_GRADS[name], EXTRA_GRAD_SAMPLE).items()}
        print(name, "ok", flush=True)
    for key, (cls, kwargs, shape) in EXTRA_CLASS_NUMERIC.items():
        model = getattr(torchvision.models, cls)(**kwargs)
        load_seeded(model)
        outputs = model_outputs(torch, model, seeded_input(shape), grad_sample=EXTRA_GRAD_SAMPLE,
                                input_stride=EXTRA_INPUT_STRIDE)
        outputs |= param_grads(model, EXTRA_PARAM_GRADS.get(key, []), EXTRA_GRAD_SAMPLE)
        arrays |= {f"{key}/{k}": v for k, v in outputs.items()}
        print(key, "ok", flush=True)
    for name, (kwargs, shape, aux_params) in EXTRA_AUX.items():
        model = torchvision.models.get_model(name, num_classes=NUM_CLASSES, **kwargs)
        load_seeded(model)
        outputs = aux_outputs(torch, model, seeded_input(shape), aux_params, input_stride=EXTRA_INPUT_STRIDE)
        arrays |= {f"{name}_aux/{k}": v for k, v in outputs.items()}
        # train-mode batch statistics of a batch of two are ill-conditioned: torch's own float32 error
        # (against float64), relative to the largest value, sets the tests' tolerance
        load_seeded(model.double())
        exact = aux_outputs(torch, model, seeded_input(shape).astype(np.float64), aux_params,
                            input_stride=EXTRA_INPUT_STRIDE)
        arrays |= {f"{name}_aux_spread/{k}": np.abs(v - exact[k]).max() / np.abs(exact[k]).max()
                   for k, v in outputs.items()}
    np.savez_compressed(path, **arrays)


def checkpoint() -> None:
    """A squeezenet1_1 state_dict in float16 written by torch.save, and the logits it gives."""
    model = torchvision.models.squeezenet1_1(num_classes=NUM_CLASSES)
    state = {k: torch.from_numpy(v) for k, v in seeded_state(shapes_of(model)).items()}
    half = {k: v.half() if v.is_floating_point() else v for k, v in state.items()}
    torch.save(half, OUT / "squeezenet1_1_fp16.pt")
    model.load_state_dict({k: v.float() for k, v in half.items()})
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(seeded_input((1, 3, 64, 64))))
    np.savez_compressed(OUT / "checkpoint.npz", logits=logits.numpy())


def transforms() -> None:
    arrays = {}
    for table in (transform_cases, utils_cases, ops_cases):
        for key, case in table(torchvision, torch).items():
            value = case()
            arrays[key] = as_array(value)
            if hasattr(value, "getbands"):   # a PIL image: its mode too
                arrays[key + "/mode"] = np.array(value.mode)
    np.savez_compressed(OUT / "transforms.npz", **arrays)
    print(len(arrays), "transform, utils and ops arrays")


def transforms_v2() -> None:
    """tests/vision_cases_v2.py: v1's augmentation transforms and v2's, seeded (transforms_v2.npz)."""
    import torchvision.transforms.v2  # noqa: F401
    import torchvision.tv_tensors  # noqa: F401
    from vision_cases_v2 import cases, flat
    arrays = {key: flat(case()) for key, case in cases(torchvision, torch).items()}
    np.savez_compressed(OUT / "transforms_v2.npz", **arrays)
    print(len(arrays), "v1/v2 augmentation arrays")


def ops_extra() -> None:
    arrays = {key: as_array(case()) for key, case in extra_ops_cases(torchvision, torch).items()}
    np.savez_compressed(OUT / "ops_extra.npz", **arrays)
    print(len(arrays), "ops arrays")


def programs() -> None:
    arrays = {}
    for path in sorted((ROOT / "tests" / "programs" / "vision").glob("*.py")):
        if path.stem == "__init__":
            continue
        program = importlib.import_module(f"programs.vision.{path.stem}")
        arrays[path.stem] = np.asarray(program.main(program.STEPS), dtype=np.float64)
        print(path.stem, arrays[path.stem][:4], flush=True)
    np.savez_compressed(OUT / "programs.npz", **arrays)


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for part in sys.argv[1:] or ["transforms", "transforms_v2", "ops_extra", "models", "models_extra", "programs"]:
        {"models": models, "models_extra": models_extra, "transforms": transforms, "transforms_v2": transforms_v2,
         "ops_extra": ops_extra, "programs": programs}[part]()
