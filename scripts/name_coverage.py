#!/usr/bin/env python
"""How much of PyTorch's public surface tapelab has, by name.

    python scripts/name_coverage.py              # the table
    python scripts/name_coverage.py --missing    # and, per namespace, the names tapelab lacks
    python scripts/name_coverage.py --markdown   # write docs/api-coverage.md (or --markdown PATH)

For each namespace (``torch``, ``torch.nn``, ``torch.nn.functional``, ``torch.Tensor``,
``torch.optim``, ``torch.utils.data``, ``torch.linalg``) PyTorch's public names are
``dir()`` without a leading underscore; a name is present when tapelab's counterpart has the
attribute. Needs PyTorch installed (it is the reference) and measures against that version.

``present`` counts every public name, as the issue that asked for this table measured it.
``deliberate omissions`` are names tapelab leaves out on purpose, each with its reason (below,
in OMISSIONS); ``coverage`` is present / (names - omissions), over the names that remain.
tests/test_name_coverage.py checks that docs/api-coverage.md carries today's numbers.
"""
from __future__ import annotations

import argparse
import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "api-coverage.md")

NAMESPACES = ("torch", "torch.nn", "torch.nn.functional", "torch.Tensor", "torch.optim", "torch.utils.data",
              "torch.linalg", "torch.fft")

# Names left out on purpose: {reason: {namespace: names}}. Keep every entry true and explained;
# tests/test_name_coverage.py checks that each listed name is still in PyTorch's namespace, and
# that the "removed" ones still raise there.
NOT_API = ("Not API: typing names, import switches, TorchScript and `__torch_function__` plumbing, docstring "
           "fragments, and `torch`/`Tensor` themselves, which PyTorch's own module code leaves in the namespace.")
REMOVED = ("Removed from PyTorch: the name still exists but calling it raises RuntimeError "
           "('deprecated since version 1.9 and is now removed' / 'reinforce() was removed').")
FOREIGN_MODULES = ("Not API: a module from outside PyTorch (the standard library, numpy) that PyTorch's own "
                   "imports leave in the namespace (found by rule: a module whose name does not start "
                   "with 'torch').")
QUANTIZATION = ("Quantized kernels: tapelab has fake quantization, observers and eager QAT (`torch.ao.quantization`), "
                "quantized tensors (codes with a scale and zero point) and quantized Linear/Conv2d (static and "
                "dynamic), but not PyTorch's other quantized kernels (quantized pooling functions, batch norm, RNN "
                "cells, FBGEMM packing, fp16 weights), so these names could not behave as PyTorch's; the "
                "quantized-tensor methods live on the quantized tensors themselves, not on every Tensor.")
DATAPIPES = ("DataPipes: PyTorch's deprecated data-loading graph (`IterDataPipe`/`MapDataPipe` and their registry); "
             "torchdata stopped developing them in 0.9 and removed them in 0.10, and PyTorch keeps them only for old "
             "code. `Dataset`, `IterableDataset`, samplers and `DataLoader` are the supported path and are present.")
SCALED_GEMM = ("CUDA tensor-core GEMM variants: float8/MX block-scaled and grouped (mixture-of-experts) matrix "
               "products with their scaling/swizzle enums, defined only for CUDA float8/bfloat16 kernels.")
TORCHSCRIPT = ("TorchScript and PyTorch's C++ runtime: the JIT's IR, types, script objects, parser and serializer, the "
               "dispatcher's keys, guards and op tags, `__torch_function__` overrides, custom-op libraries, C++ "
               "loggers, monitors and benchmarks, and internal helpers leaked into the namespace. tapelab runs Python "
               "eagerly (FX is its graph IR), so there is nothing for these to describe.")
VENDOR = ("Vendor kernel entry points (cuDNN, MIOpen, oneDNN/MKLDNN, the CUDA kernels behind SyncBatchNorm) and the "
          "IPU/XLA autocast switches: PyTorch's dispatch targets for particular libraries and devices. tapelab's ops "
          "run on numpy/cupy and are reached through the public functions (conv2d, batch_norm, grid_sample, ...).")
STORAGES = ("The storage base classes and file-backed storages: a tapelab tensor owns a numpy/cupy array; its block is "
            "seen through `untyped_storage()`/`TypedStorage` and the legacy typed classes (lazy checkpoint loaders "
            "read them), and there is no separate base class or file storage.")
SYMBOLIC = ("Symbolic shapes for torch.compile/torch.export: SymInt/SymFloat/SymBool and the sym_* helpers "
            "exist for tracing with unknown sizes; tapelab's shapes are always concrete (`torch.compile` specialises "
            "each call to its shapes under guards and recompiles for a new one).")
COMPLEX = ("Complex numbers: tapelab has complex64 and complex128 (numpy's complex types); complex32 (chalf) has no "
           "numpy array type behind it.")
SMALL_DTYPES = ("Sub-byte, bit and float8/float4 dtypes: no numpy/cupy array type stands behind them (ml_dtypes' "
                "float8 types are not wired into the engine), and PyTorch itself runs few ops on them.")
SPARSE_COMPRESSED = ("Nested/jagged tensors and the compressed sparse layouts' `*_indices_copy` functions: tapelab's "
                     "sparse tensors are COO and CSR/CSC/BSR/BSC (`sparse_csr_tensor`, `to_sparse_csr`, "
                     "`crow_indices`); the `*_copy` forms and ragged batches are not there yet.")
NETWORK = "Downloads at run time: torch.hub fetches models and code from GitHub; tapelab does no network access."
OMISSIONS: dict[str, dict[str, tuple[str, ...]]] = {
    QUANTIZATION: {
        "torch.nn": ("intrinsic", "qat", "quantizable", "quantized"),
        "torch": ("QInt32Storage", "QInt8Storage", "QUInt2x4Storage", "QUInt4x2Storage", "QUInt8Storage",
                  "choose_qparams_optimized", "empty_quantized", "fbgemm_linear_fp16_weight",
                  "fbgemm_linear_fp16_weight_fp32_activation", "fbgemm_linear_int8_weight",
                  "fbgemm_linear_int8_weight_fp32_activation", "fbgemm_linear_quantize_weight",
                  "fbgemm_pack_gemm_matrix_fp16", "fbgemm_pack_quantized_matrix", "int_repr", "q_per_channel_axis",
                  "q_per_channel_scales", "q_per_channel_zero_points", "q_scale", "q_zero_point",
                  "quantize_per_tensor_dynamic", "quantized_batch_norm", "quantized_gru", "quantized_gru_cell",
                  "quantized_lstm", "quantized_lstm_cell", "quantized_max_pool1d", "quantized_max_pool2d",
                  "quantized_max_pool3d", "quantized_rnn_relu_cell", "quantized_rnn_tanh_cell"),
        "torch.Tensor": ("dequantize", "int_repr", "q_per_channel_axis", "q_per_channel_scales",
                         "q_per_channel_zero_points", "q_scale", "q_zero_point", "qscheme"),
    },
    TORCHSCRIPT: {
        "torch": ("AVG", "AggregationType", "AliasDb", "AnyType", "Argument", "ArgumentSpec", "AwaitType",
                  "BenchmarkConfig", "BenchmarkExecutionStats", "Block", "BoolType", "BufferDict", "CallStack",
                  "Capsule", "ClassType", "Code", "CompilationUnit", "CompleteArgumentSpec", "ComplexType",
                  "ConcreteModuleType", "ConcreteModuleTypeBuilder", "DeepCopyMemoTable",
                  "DeserializationStorageContext", "DeviceObjType", "DictType", "DisableTorchFunction",
                  "DisableTorchFunctionSubclass", "DispatchKey", "DispatchKeySet", "EnumType", "ErrorReport",
                  "ExcludeDispatchKeyGuard", "ExecutionPlan", "FileCheck", "FloatType", "FunctionSchema", "FutureType",
                  "Gradient", "Graph", "GraphExecutorState", "IODescriptor", "InferredType", "IntType",
                  "InterfaceType", "JITException", "ListType", "LiteScriptModule", "LockingLogger", "LoggerBase",
                  "ModuleDict", "Node", "NoneType", "NoopLogger", "NumberType", "OperatorInfo", "OptionalType",
                  "PRIVATE_OPS", "ParameterDict", "PyObjectType", "PyTorchFileReader", "PyTorchFileWriter", "RRefType",
                  "SUM", "ScriptClass", "ScriptClassFunction", "ScriptDict", "ScriptDictIterator",
                  "ScriptDictKeyIterator", "ScriptFunction", "ScriptList", "ScriptListIterator", "ScriptMethod",
                  "ScriptModule", "ScriptModuleSerializer", "ScriptObject", "ScriptObjectProperty",
                  "SerializationStorageContext", "StaticModule", "StreamObjType", "StringType", "SymBoolType",
                  "SymIntType", "Tag", "TensorType", "ThroughputBenchmark", "TracingState", "TupleType", "Type",
                  "UnionType", "Use", "Value", "classes", "classproperty", "compiled_with_cxx11_abi", "cpp",
                  "get_file_path", "import_ir_module", "import_ir_module_from_buffer", "library",
                  "merge_type_from_type_comment", "monitor", "overrides", "parse_ir", "parse_schema",
                  "parse_type_comment", "prepare_multiprocessing_environment",
                  "profiler_allow_cudagraph_cupti_lazy_reinit_cuda12", "unify_type_list"),
    },
    VENDOR: {
        "torch": ("batch_norm_backward_elemt", "batch_norm_backward_reduce", "batch_norm_elemt",
                  "batch_norm_gather_stats", "batch_norm_gather_stats_with_counts", "batch_norm_stats",
                  "batch_norm_update_stats", "cudnn_affine_grid_generator", "cudnn_batch_norm", "cudnn_convolution",
                  "cudnn_convolution_add_relu", "cudnn_convolution_relu", "cudnn_convolution_transpose",
                  "cudnn_grid_sampler", "cudnn_is_acceptable", "get_autocast_ipu_dtype", "get_autocast_xla_dtype",
                  "is_autocast_ipu_enabled", "is_autocast_xla_enabled", "miopen_batch_norm", "miopen_convolution",
                  "miopen_convolution_add_relu", "miopen_convolution_relu", "miopen_convolution_transpose",
                  "miopen_ctc_loss", "miopen_depthwise_convolution", "miopen_rnn", "mkldnn_adaptive_avg_pool2d",
                  "mkldnn_convolution", "mkldnn_linear_backward_weights", "mkldnn_max_pool2d", "mkldnn_max_pool3d",
                  "mkldnn_rnn_layer", "set_autocast_ipu_dtype", "set_autocast_ipu_enabled", "set_autocast_xla_dtype",
                  "set_autocast_xla_enabled"),
        "torch.Tensor": ("ipu", "to_mkldnn"),
    },
    STORAGES: {
        "torch": ("Storage", "StorageBase", "from_file"),
        "torch.Tensor": ("storage_type",),
    },
    SYMBOLIC: {
        "torch": ("SymBool", "SymFloat", "SymInt", "sym_constrain_range", "sym_constrain_range_for_size",
                  "sym_float", "sym_fresh_size", "sym_int", "sym_ite", "sym_max", "sym_min", "sym_not", "sym_sqrt",
                  "sym_sum"),
    },
    COMPLEX: {
        "torch": ("chalf", "complex32"),
        "torch.Tensor": ("chalf",),
    },
    SMALL_DTYPES: {
        "torch": ("bit", "bits16", "bits1x8", "bits2x4", "bits4x2", "bits8", "float4_e2m1fn_x2", "float8_e4m3fn",
                  "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "int1", "int2", "int3",
                  "int4", "int5", "int6", "int7", "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7"),
    },
    SPARSE_COMPRESSED: {
        "torch": ("ccol_indices_copy", "col_indices_copy", "crow_indices_copy", "nested",
                  "row_indices_copy"),
        "torch.Tensor": ("to_padded_tensor",),
    },
    NETWORK: {
        "torch": ("hub",),
    },
    DATAPIPES: {
        "torch.utils.data": ("DFIterDataPipe", "DataChunk", "IterDataPipe", "MapDataPipe", "argument_validation",
                             "datapipes", "functional_datapipe", "graph", "graph_settings",
                             "guaranteed_datapipes_determinism", "non_deterministic", "runtime_validation",
                             "runtime_validation_disabled"),
    },
    SCALED_GEMM: {
        "torch.nn.functional": ("ScalingType", "SwizzleType", "grouped_mm", "scaled_grouped_mm", "scaled_mm"),
    },
    NOT_API: {
        "torch": ("TYPE_CHECKING", "USE_GLOBAL_DEPS", "USE_RTLD_GLOBAL_WITH_LIBTORCH", "torch"),
        "torch.nn.functional": ("BroadcastingList1", "BroadcastingList2", "BroadcastingList3", "Callable", "DType",
                                "Optional", "TYPE_CHECKING", "Tensor", "boolean_dispatch", "handle_torch_function",
                                "has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
                                "reproducibility_notes", "sparse_support_notes", "tf32_notes", "torch"),
        "torch.linalg": ("common_notes",),
        "torch.fft": ("common_args", "factory_common_args", "torch"),
    },
    REMOVED: {
        "torch": ("eig", "lstsq", "matrix_rank", "solve", "symeig"),
        "torch.Tensor": ("eig", "lstsq", "reinforce", "solve", "symeig"),
    },
}


def _load():
    import torch

    import tapelab
    import tapelab.fft
    import tapelab.linalg
    import tapelab.nn.functional
    import tapelab.optim
    import tapelab.utils.data
    import torch.fft
    import torch.linalg
    import torch.nn.functional
    import torch.optim
    import torch.utils.data
    ours = {"torch": tapelab, "torch.nn": tapelab.nn, "torch.nn.functional": tapelab.nn.functional,
            "torch.Tensor": tapelab.Tensor, "torch.optim": tapelab.optim, "torch.utils.data": tapelab.utils.data,
            "torch.linalg": tapelab.linalg, "torch.fft": tapelab.fft}
    theirs = {"torch": torch, "torch.nn": torch.nn, "torch.nn.functional": torch.nn.functional,
              "torch.Tensor": torch.Tensor, "torch.optim": torch.optim, "torch.utils.data": torch.utils.data,
              "torch.linalg": torch.linalg, "torch.fft": torch.fft}
    return torch.__version__, theirs, ours


def public_names(obj) -> list[str]:
    return sorted(n for n in dir(obj) if not n.startswith("_"))


def omissions(namespace: str, reference) -> dict[str, str]:
    """``{name: reason}`` for the names of ``namespace`` left out on purpose."""
    out = {}
    for reason, table in OMISSIONS.items():
        for name in table.get(namespace, ()):
            out[name] = reason
    for name in public_names(reference):
        value = getattr(reference, name, None)
        if isinstance(value, types.ModuleType) and not value.__name__.startswith("torch"):
            out[name] = FOREIGN_MODULES
    return out


def measure() -> tuple[str, list[dict]]:
    """PyTorch's version and one row per namespace: names, present, omitted, missing, coverage."""
    version, theirs, ours = _load()
    rows = []
    for ns in NAMESPACES:
        names = public_names(theirs[ns])
        omitted = {n: r for n, r in omissions(ns, theirs[ns]).items() if n in names}
        present = [n for n in names if hasattr(ours[ns], n)]
        missing = [n for n in names if n not in omitted and not hasattr(ours[ns], n)]
        counted = len(names) - len(omitted)
        present_counted = counted - len(missing)
        rows.append(dict(namespace=ns, names=len(names), present=len(present), omitted=len(omitted),
                         omitted_names=omitted, missing=missing,
                         percent=round(100.0 * len(present) / len(names)),
                         coverage=round(100.0 * present_counted / counted) if counted else 100,
                         present_counted=present_counted, counted=counted))
    return version, rows


HEADER = ("| namespace | PyTorch names | present in tapelab | % | deliberate omissions | "
          "coverage of the rest |")


def table(rows: list[dict]) -> str:
    lines = [HEADER, "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| `{r['namespace']}` | {r['names']} | {r['present']} | {r['percent']}% | {r['omitted']} | "
                     f"{r['present_counted']}/{r['counted']} ({r['coverage']}%) |")
    return "\n".join(lines)


def parse_table(markdown: str) -> list[tuple]:
    """The rows of the coverage table in ``markdown``: (namespace, names, present, omitted, counted-present,
    counted) — what the test compares with a fresh measurement."""
    out = []
    lines = markdown.splitlines()
    start = lines.index(HEADER)
    for line in lines[start + 2:]:
        if not line.startswith("| `"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        pc, counted = cells[5].split(" ")[0].split("/")
        out.append((cells[0].strip("`"), int(cells[1]), int(cells[2]), int(cells[4]), int(pc), int(counted)))
    return out


def row_key(r: dict) -> tuple:
    return (r["namespace"], r["names"], r["present"], r["omitted"], r["present_counted"], r["counted"])


def markdown(version: str, rows: list[dict]) -> str:
    total = sum(r["names"] for r in rows)
    present = sum(r["present"] for r in rows)
    parts = [
        "# PyTorch API coverage by name",
        "",
        "<!-- generated by `python scripts/name_coverage.py --markdown`; do not edit by hand "
        "(tests/test_name_coverage.py checks the numbers) -->",
        "",
        f"Measured against PyTorch {version}. For each namespace, PyTorch's public names are `dir()` without a "
        "leading underscore; a name is *present* when tapelab's counterpart has it. A name being present says "
        "nothing yet about its behaviour: that is what `tests/` compares against PyTorch.",
        "",
        table(rows),
        "",
        f"All namespaces together: {present} of {total} names present ({round(100.0 * present / total)}%). "
        "*Coverage of the rest* leaves the deliberate omissions below out of both counts.",
        "",
        "`python scripts/name_coverage.py --missing` lists the names still missing in each namespace.",
        "",
        "## Deliberate omissions",
        "",
        "Names tapelab leaves out on purpose, each with its reason: machinery an eager numpy/cupy engine has no "
        "counterpart for (TorchScript, vendor kernels, storages), or a whole feature tapelab does not have yet "
        "(quantization, complex numbers, nested tensors), named here so the gap stays visible. A name "
        "that is merely missing is not listed: `--missing` shows those.",
        "",
    ]
    by_reason: dict[str, list[tuple[str, list[str]]]] = {}
    for r in rows:
        names_by_reason: dict[str, list[str]] = {}
        for name, reason in sorted(r["omitted_names"].items()):
            names_by_reason.setdefault(reason, []).append(name)
        for reason, names in names_by_reason.items():
            by_reason.setdefault(reason, []).append((r["namespace"], names))
    for reason in sorted(by_reason):
        parts += [f"- {reason}"] + [f"  - `{ns}` ({len(names)}): " + ", ".join(f"`{n}`" for n in names)
                                     for ns, names in by_reason[reason]]
    parts.append("")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--missing", action="store_true", help="list the names tapelab lacks, per namespace")
    ap.add_argument("--markdown", nargs="?", const=DOC, metavar="PATH",
                    help=f"write the table and the omissions as markdown (default {os.path.relpath(DOC, ROOT)})")
    args = ap.parse_args(argv)
    version, rows = measure()
    print(f"PyTorch {version}: public names present in tapelab")
    width = max(len(r["namespace"]) for r in rows)
    print(f"{'namespace':<{width}}  {'present':>13}  {'%':>4}  {'omitted':>7}  {'coverage of the rest':>22}")
    for r in rows:
        print(f"{r['namespace']:<{width}}  {r['present']:>5} / {r['names']:<5}  {r['percent']:>3}%  {r['omitted']:>7}  "
              f"{r['present_counted']:>7} / {r['counted']:<5} ({r['coverage']:>3}%)")
    if args.missing:
        for r in rows:
            print(f"\n{r['namespace']}: {len(r['missing'])} missing")
            print("  " + " ".join(r["missing"]))
    if args.markdown:
        os.makedirs(os.path.dirname(os.path.abspath(args.markdown)), exist_ok=True)
        with open(args.markdown, "w") as f:
            f.write(markdown(version, rows))
        print(f"\nwrote {os.path.relpath(args.markdown, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
