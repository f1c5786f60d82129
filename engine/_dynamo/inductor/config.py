"""``torch._inductor.config``: inductor's settings that programs set, with PyTorch's defaults. tapelab's
compiler reads none of them (it generates no triton or C++ code); they are accepted so that a program
that tunes inductor runs unchanged, and a name PyTorch does not have is refused as PyTorch refuses it."""
from ...utils._config_module import install_config_module

aggressive_fusion = False
autotune_local_cache = True
benchmark_kernel = False
compile_threads = 2
conv_1x1_as_mm = False
coordinate_descent_tuning = False
cpp_wrapper = False
dce = False
debug = False
emulate_precision_casts = False
epilogue_fusion = True
fallback_random = False
force_fuse_int_mm_with_mul = False
freezing = False
fx_graph_cache = True
fx_graph_remote_cache = None
keep_output_stride = True
layout_optimization = True
max_autotune = False
max_autotune_gemm = False
max_autotune_pointwise = False
pattern_matcher = True
permute_fusion = False
reorder_for_locality = True
search_autotune_cache = False
shape_padding = True
size_asserts = True
split_reductions = True
unroll_reductions_threshold = 8
use_mixed_mm = True


class triton:
    cudagraphs = False
    cudagraph_trees = True
    cudagraph_skip_dynamic_graphs = False
    unique_kernel_names = True


class trace:
    enabled = False
    graph_diagram = False


install_config_module(__name__, "torch._inductor.config")
