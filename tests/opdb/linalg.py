"""OpInfos for matrix products."""
from __future__ import annotations

from .core import ErrorInput, OpInfo, Sample, arr

OPS = [
    OpInfo("matmul", lambda m, a, b: a @ b,
           lambda: [Sample((arr(3, 4), arr(4, 5)), name="mm"), Sample((arr(2, 3, 4), arr(4, 2)), name="batched"),
                    Sample((arr(4), arr(4, 3)), name="vec_mat"), Sample((arr(3, 4), arr(4)), name="mat_vec"),
                    Sample((arr(2, 1, 3, 4), arr(5, 4, 2)), name="bcast"), Sample((arr(4), arr(4)), name="dot")],
           errors=lambda: [ErrorInput(Sample((arr(3, 4), arr(3, 4))), RuntimeError, "cannot be multiplied")]),
]
