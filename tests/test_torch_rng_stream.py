"""A seed gives PyTorch's CPU numbers: the same initial weights, data order, dropout masks and noise
under tapelab as under torch (engine/core/cpu_stream.py), compared bit for bit against torch."""
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import tapelab as tl
from tapelab.utils.data import DataLoader, RandomSampler, TensorDataset, WeightedRandomSampler, random_split


def _intel_mkl() -> bool:
    """PyTorch's MKL build draws ``bernoulli_(p)`` from MKL's own stream on Intel CPUs only."""
    try:
        with open("/proc/cpuinfo") as f:
            intel = "GenuineIntel" in f.read()
    except OSError:
        return False
    return intel and torch.backends.mkl.is_available()


def both(fn, seed=0):
    """``fn(lib)`` after ``lib.manual_seed(seed)``, under torch and tapelab, as numpy arrays."""
    torch.manual_seed(seed)
    expected = fn(torch)
    tl.manual_seed(seed)
    got = fn(tl)
    return _np(expected), _np(got)


def _np(x):
    if isinstance(x, (list, tuple)):
        return [_np(v) for v in x]
    if hasattr(x, "detach"):
        x = x.detach()
        return x.float().numpy() if str(x.dtype) in ("torch.bfloat16", "tapelab.bfloat16") else x.numpy()
    return np.asarray(x)


def assert_same(pair):
    expected, got = pair
    if isinstance(expected, list):
        for e, g in zip(expected, got):
            assert_same((e, g))
        return
    assert expected.dtype == got.dtype and expected.shape == got.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [1, 7, 16, 1000])
def test_rand_and_uniform_equal_torch(dtype, n):
    assert_same(both(lambda lib: lib.rand(n, dtype=getattr(lib, dtype)), seed=n))
    expected, got = both(lambda lib: lib.empty(n, dtype=getattr(lib, dtype)).uniform_(-0.37, 2.5), seed=n)
    if dtype != "bfloat16":
        assert_same((expected, got))
    else:   # a few rounding ties go the other way
        np.testing.assert_allclose(got, expected, rtol=np.finfo(np.float32).eps)
        assert np.mean(got == expected) > 0.9


@pytest.mark.parametrize("n", [1, 3, 15, 16, 17, 31, 100, 4096, 100003])
def test_randn_float32_equal_torch(n, loops):
    """Under 16 numbers Box-Muller in double with the kept sine; from 16 up the AVX2 kernel (its
    numba loop, kernels/normal.py, and its numpy form)."""
    assert_same(both(lambda lib: [lib.randn(n), lib.randn(3), lib.randn(n, 2)], seed=n))


@pytest.mark.parametrize("n", [1, 5, 15])
def test_small_float64_normals_equal_torch(n):
    assert_same(both(lambda lib: [lib.randn(n, dtype=lib.float64), lib.randn(1, dtype=lib.float64)], seed=3))


@pytest.mark.parametrize("n", [16, 1000, 20001])
def test_large_float64_normals_match_torch_to_the_last_bit_or_one(n):
    """numpy's vectorised double log/cos/sin against glibc's: equal or one ulp apart."""
    expected, got = both(lambda lib: lib.randn(n, dtype=lib.float64), seed=9)
    np.testing.assert_allclose(got, expected, rtol=4e-16, atol=4e-16)
    assert np.mean(got == expected) > 0.99


def test_normal_forms_equal_torch():
    def draws(lib):
        m = lib.linspace(-1, 1, 40)
        s = lib.linspace(0.1, 2, 40)
        return [lib.empty(50).normal_(0.5, 3.0), lib.empty(5).normal_(-1.0, 0.25), lib.normal(m, s),
                lib.normal(m, 2.0), lib.normal(1.5, s), lib.normal(2.0, 0.5, (33,))]
    assert_same(both(draws, seed=11))


def test_integers_equal_torch():
    def draws(lib):
        return [lib.randint(0, 10, (50,)), lib.randint(-5, 2 ** 40, (20,)), lib.randint(3, 9, (7,), dtype=lib.float32),
                lib.empty(20, dtype=lib.int64).random_(), lib.empty(20, dtype=lib.int32).random_(),
                lib.empty(20, dtype=lib.uint8).random_(), lib.empty(20, dtype=lib.bool).random_(),
                lib.empty(20, dtype=lib.float32).random_(), lib.empty(20, dtype=lib.float64).random_(),
                lib.empty(9, dtype=lib.int64).random_(4, 17), lib.empty(9, dtype=lib.int16).random_(100)]
    assert_same(both(draws, seed=5))


@pytest.mark.parametrize("dtype", ["int64", "int32", "float64", "float32", "bfloat16", "float16"])
def test_integers_over_wide_spans_equal_torch(dtype):
    """ATen draws a 64-bit word per number once the span reaches 2**28 (a 10**9 token id drew 32-bit
    words here and every later number of the program differed), and moves a float dtype's bounds to
    numbers it holds first (``update_from``/``update_to``): the same numbers, then the same stream."""
    spans = [(0, 10), (0, 2 ** 28 - 1), (0, 2 ** 28), (0, 10 ** 9), (-2 ** 27, 2 ** 27), (2 ** 24 - 3, 2 ** 24 + 9),
             (0, 2 ** 33), (2040, 2060), (0, 65504)]

    def draws(lib):
        dt, out = getattr(lib, dtype), []
        for low, high in spans:
            if dtype in ("int32", "float16") and high > {"int32": 2 ** 31, "float16": 65505}[dtype]:
                continue
            out += [lib.randint(low, high, (5,), dtype=dt), lib.empty(3, dtype=dt).random_(low, high)]
        return out + [lib.rand(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the float dtypes' "out of bounds [-(2^24), 2^24]" (checked below)
        assert_same(both(draws, seed=9))


def test_integer_bounds_a_dtype_cannot_hold_are_refused_or_warned_as_torch():
    for lib in (torch, tl):
        with pytest.raises(RuntimeError, match=r"^to - 1 is out of bounds for int$"):
            lib.randint(0, 2 ** 32, (2,), dtype=lib.int32)
        with pytest.raises(RuntimeError, match=r"^from is out of bounds for unsigned char$"):
            lib.empty(2, dtype=lib.uint8).random_(-5, 3)
        with pytest.raises(RuntimeError, match=r"^to - 1 is out of bounds for c10::Half$"):
            lib.randint(0, 70000, (2,), dtype=lib.float16)
        with pytest.warns(UserWarning, match=r"^to - 1 is out of bounds \[-\(2\^24\), 2\^24\]\. Due to precision "
                                             r"limitations float can support"):
            lib.randint(0, 2 ** 25, (2,), dtype=lib.float32)


@pytest.mark.parametrize("n", [0, 1, 2, 10, 1000, 70000])
def test_randperm_equal_torch(n, loops):   # the swaps in the numba loop and in Python
    assert_same(both(lambda lib: [lib.randperm(n), lib.randperm(n, generator=lib.Generator().manual_seed(n))]))


def test_bernoulli_with_probabilities_equal_torch():
    def draws(lib):
        p = lib.linspace(0, 1, 64)
        return [lib.bernoulli(p), lib.bernoulli(p.double()), lib.empty(64).bernoulli_(p)]
    assert_same(both(draws, seed=2))


@pytest.mark.skipif(_intel_mkl(), reason="PyTorch's MKL build draws bernoulli_(p) from MKL on Intel CPUs")
def test_dropout_masks_and_bernoulli_of_a_number_equal_torch():
    def draws(lib):
        x = lib.ones(8, 33)
        return [lib.nn.functional.dropout(x, 0.3), lib.empty(40).bernoulli_(0.7), lib.nn.Dropout(0.5)(x)]
    assert_same(both(draws, seed=4))


def test_multinomial_with_replacement_equal_torch():
    def draws(lib):
        w = lib.tensor([[0.1, 0.0, 3.0, 1.5, 0.2], [1.0, 1.0, 1.0, 1.0, 1.0]])
        return [lib.multinomial(w, 12, replacement=True), lib.multinomial(w[0].double(), 30, replacement=True)]
    assert_same(both(draws, seed=8))


def test_module_initialisation_equal_torch():
    def build(lib):
        nn = lib.nn
        model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
        emb, lstm = nn.Embedding(50, 16), nn.LSTM(16, 12, 2)
        return [p for m in (model, emb, lstm) for p in m.parameters()]
    assert_same(both(build, seed=0))


def test_a_seeded_training_loop_equals_torch_step_for_step():
    """Data order, initial weights and dropout from the same seed: the losses agree to float rounding."""
    def run(lib):
        nn = lib.nn
        x = lib.randn(96, 10)
        y = (x[:, 0] > 0).long()
        loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True) if lib is tl else \
            torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16, shuffle=True)
        model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 2))
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        losses, first = [], []
        for _ in range(2):
            for xb, yb in loader:
                first.append(int(yb[0]))
                loss = nn.functional.cross_entropy(model(xb), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return np.array(first), np.array(losses)
    (t_first, t_loss), (l_first, l_loss) = both(run, seed=1)
    np.testing.assert_array_equal(l_first, t_first)
    if not _intel_mkl():
        np.testing.assert_allclose(l_loss, t_loss, rtol=1e-5)


def test_data_utilities_draw_torch_orders():
    def draws(lib):
        data = lib.arange(40) if lib is tl else torch.arange(40)
        split = random_split if lib is tl else torch.utils.data.random_split
        rs = RandomSampler if lib is tl else torch.utils.data.RandomSampler
        ws = WeightedRandomSampler if lib is tl else torch.utils.data.WeightedRandomSampler
        a, b = split(range(40), [30, 10], generator=lib.Generator().manual_seed(3))
        return [np.array(a.indices), np.array(list(rs(data))), np.array(list(rs(data, replacement=True, num_samples=50))),
                np.array(list(ws([0.1, 2.0, 0.5, 1.0], 25)))]
    assert_same(both(draws, seed=6))


def test_state_round_trip_keeps_the_kept_normal():
    tl.manual_seed(0)
    tl.randn(3)                      # leaves a kept sine behind
    state = tl.get_rng_state()
    a = [tl.randn(5), tl.rand(4), tl.randperm(9)]
    tl.set_rng_state(state)
    b = [tl.randn(5), tl.rand(4), tl.randperm(9)]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    torch.manual_seed(0)
    torch.randn(3)
    np.testing.assert_array_equal(a[0].numpy(), torch.randn(5).numpy())
    with pytest.raises(RuntimeError, match="bytes"):
        tl.set_rng_state(tl.zeros(7, dtype=tl.uint8))


def test_seeds_as_torch_keeps_them():
    for seed in (0, -5, 2 ** 40 + 3, 2 ** 64 - 1):
        assert tl.manual_seed(seed).initial_seed() == torch.manual_seed(seed).initial_seed()
    assert_same(both(lambda lib: lib.rand(5), seed=2 ** 40 + 3))
    with pytest.raises(RuntimeError, match="Overflow"):
        tl.manual_seed(2 ** 64)


def test_a_fresh_process_draws_torchs_default_numbers():
    """PyTorch's default generator starts from a fixed seed: an unseeded program's first numbers."""
    code = "import {0}, numpy; numpy.save('/dev/stdout', {0}.rand(4).numpy())"
    out = [subprocess.run([sys.executable, "-c", code.format(lib)], capture_output=True, check=True).stdout
           for lib in ("torch", "tapelab")]
    assert out[0] == out[1]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("args", [(-1, 1, 40), (0.1, 2, 40), (-3.5, 7.25, 100001), (5, -3, 33), (1, 1, 7), (0, 1, 2)])
def test_linspace_points_equal_torch(dtype, args):
    """Not random, but the points a seeded program scales its noise by (``normal(mean, std)``)."""
    assert_same((torch.linspace(*args, dtype=getattr(torch, dtype)).numpy(),
                 tl.linspace(*args, dtype=getattr(tl, dtype)).numpy()))


def test_trunc_normal_draws_torchs_rejection_samples():
    def draws(lib):
        return [lib.nn.init.trunc_normal_(lib.empty(500), std=0.02),
                lib.nn.init.trunc_normal_(lib.empty(500), mean=0.0, std=1.0, a=0.5, b=3.0),
                lib.nn.init.trunc_normal_(lib.empty(200, dtype=lib.float64), std=1.0, a=-0.1, b=0.05)]
    assert_same(both(draws, seed=12))


def test_other_in_place_distributions_and_sampling_without_replacement_equal_torch():
    def draws(lib):
        return [lib.empty(30).exponential_(2.0), lib.empty(20).cauchy_(1.0, 2.0), lib.empty(20).geometric_(0.3),
                lib.empty(20).log_normal_(0.5, 0.7),
                lib.multinomial(lib.tensor([0.1, 2., 0.5, 1., 3.]), 3), lib.multinomial(lib.rand(4, 7), 1),
                lib.nn.functional.gumbel_softmax(lib.randn(3, 5), tau=0.5, hard=True)]
    assert_same(both(draws, seed=13))
    for draw in (lambda lib: lib.empty(500, dtype=lib.float64).exponential_(),
                 lambda lib: lib.empty(500, dtype=lib.float64).log_normal_()):
        expected, got = both(draw, seed=13)
        np.testing.assert_allclose(got, expected, rtol=4e-16)   # numpy's log1p/exp against glibc's: an ulp at most


@pytest.mark.skipif(_intel_mkl(), reason="PyTorch's MKL build draws bernoulli_(p) from MKL on Intel CPUs")
def test_attention_dropout_feature_dropouts_and_rrelu_noise_equal_torch():
    def draws(lib):
        F = lib.nn.functional
        q = lib.randn(2, 3, 5, 8)
        mha = lib.nn.MultiheadAttention(16, 4, dropout=0.2, batch_first=True)
        x = lib.randn(2, 5, 16)
        x_neg = lib.randn(40, requires_grad=True)
        y = F.rrelu(x_neg, training=True)
        y.sum().backward()
        return [F.scaled_dot_product_attention(q, q, q, dropout_p=0.3), mha(x, x, x)[0],
                F.dropout2d(lib.ones(2, 6, 3, 3), 0.5), F.alpha_dropout(lib.ones(20), 0.5), y, x_neg.grad]
    expected, got = both(draws, seed=14)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)   # masks equal; attention sums round apart


@pytest.mark.skipif(_intel_mkl(), reason="PyTorch's MKL build draws bernoulli_(p) from MKL on Intel CPUs")
def test_non_contiguous_tensors_are_filled_in_memory_order():
    """PyTorch's empty_like keeps a transposed layout and TensorIterator fills memory in order: a
    batch-first attention output's dropout mask, in-place draws into a transposed tensor."""
    def draws(lib):
        x = lib.ones(7, 3, 16).transpose(0, 1)
        enc = lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True), 2,
                                        enable_nested_tensor=False)
        return [lib.nn.functional.dropout(x, 0.3), lib.bernoulli(lib.full((5, 20), 0.4).t()),
                lib.empty(20, 5).t().uniform_(), lib.empty(20, 5).t().normal_(), enc(lib.randn(3, 7, 16))]
    expected, got = both(draws, seed=15)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-6)


def test_like_factories_of_a_transposed_tensor_and_init_functions_equal_torch():
    def draws(lib):
        nn = lib.nn
        t = lib.empty(20, 3).t()
        inits = [nn.init.xavier_uniform_(lib.empty(6, 5)), nn.init.xavier_normal_(lib.empty(6, 5)),
                 nn.init.kaiming_normal_(lib.empty(6, 5)), nn.init.sparse_(lib.empty(6, 5), 0.3)]
        return [lib.rand_like(t), lib.randn_like(t), lib.randn_like(lib.empty(4, 5)), *inits,
                nn.GRU(3, 4).weight_hh_l0, nn.MultiheadAttention(8, 2, add_bias_kv=True).bias_k,
                lib.randperm(20, dtype=lib.int32)]
    assert_same(both(draws, seed=16))
    split = lambda lib: (random_split if lib is tl else torch.utils.data.random_split)    # noqa: E731
    subset = lambda lib: (tl.utils.data.SubsetRandomSampler if lib is tl else torch.utils.data.SubsetRandomSampler)  # noqa: E731
    assert_same(both(lambda lib: [np.array(list(subset(lib)([5, 6, 7, 8, 9]))),
                                  np.array(split(lib)(range(10), [0.3, 0.7])[0].indices)], seed=17))


def test_distribution_samples_equal_torch():
    def draws(lib):
        D = lib.distributions
        dists = [D.Normal(lib.zeros(3), 2.0), D.Exponential(lib.tensor([1.0, 2.0])), D.Laplace(lib.zeros(3), lib.ones(3)),
                 D.Cauchy(lib.zeros(3), lib.ones(3) * 2), D.Gumbel(lib.zeros(3), lib.ones(3)), D.Geometric(lib.tensor([0.3, 0.7])),
                 D.HalfCauchy(lib.ones(2)), D.LogNormal(lib.zeros(3), lib.ones(3)), D.Uniform(lib.zeros(2), lib.ones(2)),
                 D.Bernoulli(logits=lib.zeros(4)), D.Categorical(probs=lib.ones(5)), D.OneHotCategorical(probs=lib.ones(4)),
                 D.RelaxedBernoulli(lib.tensor([0.5]), probs=lib.tensor([0.3, 0.6])),
                 D.MultivariateNormal(lib.zeros(2), lib.eye(2) * 2), D.Weibull(lib.ones(2), lib.ones(2) * 1.5),
                 D.Pareto(lib.ones(2), lib.ones(2)), D.Kumaraswamy(lib.ones(2), lib.ones(2) * 2),
                 D.LogisticNormal(lib.zeros(2), lib.ones(2)), D.ContinuousBernoulli(probs=lib.tensor([0.2, 0.7])),
                 D.VonMises(lib.zeros(3), lib.tensor([0.5, 2.0, 1e-6]))]
        return [d.sample((2,)) for d in dists]
    expected, got = both(draws, seed=18)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=2e-6, atol=1e-7)   # the draws equal; transforms round apart


def test_gamma_family_draws_equal_torch():
    def draws(lib):
        D = lib.distributions
        return [lib._standard_gamma(lib.tensor([0.3, 1.0, 2.5, 7.0, 0.05])),
                lib._standard_gamma(lib.tensor([0.3, 1.0, 2.5], dtype=lib.float64)),
                D.Gamma(lib.tensor([2.0, 0.5]), lib.tensor([1.0, 3.0])).sample((3,)),
                D.Beta(lib.tensor([2.0, 0.5]), lib.tensor([1.0, 3.0])).sample((2,)),
                D.Dirichlet(lib.tensor([1.0, 2.0, 0.5])).sample((2,)), lib._sample_dirichlet(lib.tensor([[0.4, 3.0]])),
                D.Chi2(lib.tensor([3.0])).sample((3,)), D.StudentT(lib.tensor([4.0])).sample((3,))]
    assert_same(both(draws, seed=19))


def test_beta_and_dirichlet_rsample_keep_a_pathwise_gradient():
    tl.manual_seed(0)
    c = tl.tensor([2.0, 0.7, 1.5], requires_grad=True)
    x = tl.distributions.Dirichlet(c).rsample((4000,))
    (x[:, 0].mean()).backward()
    # d E[x_0] / d c = (S - c_0) / S^2 for c_0, -c_0 / S^2 for the others (S = sum c)
    s = 4.2
    np.testing.assert_allclose(c.grad.numpy(), [(s - 2.0) / s ** 2, -2.0 / s ** 2, -2.0 / s ** 2], atol=0.02)


def test_poisson_draws_equal_torch():
    rates = [0.5, 3.0, 12.0, 100.0, 0.0, 7.5, 2500.0, 1e-3]
    assert_same(both(lambda lib: [lib.poisson(lib.tensor(rates)), lib.poisson(lib.tensor(rates, dtype=lib.float64)),
                                  lib.distributions.Poisson(lib.tensor([4.0, 30.0])).sample((3,))], seed=20))


@pytest.mark.parametrize("used", [0, 3, 700])
def test_generator_state_is_pytorchs_byte_for_byte(used):
    """A state saved under PyTorch (a checkpoint's rng_state) restores here and continues with its
    numbers, and ours restores under PyTorch."""
    torch.manual_seed(5)
    torch.rand(used)
    torch.randn(3)                  # a kept normal in the state
    state = torch.get_rng_state()
    tl.manual_seed(5)
    tl.rand(used)
    tl.randn(3)
    np.testing.assert_array_equal(tl.get_rng_state().numpy(), state.numpy())
    tl.set_rng_state(tl.tensor(state.numpy()))
    np.testing.assert_array_equal(tl.randn(5).numpy(), torch.randn(5).numpy())
    torch.set_rng_state(torch.from_numpy(tl.get_rng_state().numpy()))
    np.testing.assert_array_equal(torch.rand(4).numpy(), tl.rand(4).numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binomial_draws_equal_torch(dtype):
    rng = np.random.default_rng(1)
    counts = np.floor(rng.uniform(0, 500, 300))
    probs = rng.uniform(0, 1, 300)
    probs[:5] = [0.0, 1.0, 0.5, 0.999, 0.001]
    assert_same(both(lambda lib: [lib.binomial(lib.tensor(counts, dtype=getattr(lib, dtype)),
                                               lib.tensor(probs, dtype=getattr(lib, dtype))),
                                  lib.distributions.Binomial(5, lib.tensor([0.3, 0.6])).sample((3,))], seed=21))


def test_complex_draws_equal_torch():
    """PyTorch fills a complex tensor's real view: uniform parts, or normal parts of variance 1/2."""
    def draws(lib):
        return [lib.rand(5, dtype=lib.complex64), lib.randn(20, dtype=lib.complex64), lib.rand(3, dtype=lib.complex128),
                lib.randn_like(lib.zeros(7, dtype=lib.complex64)), lib.empty(4, dtype=lib.complex64).normal_(),
                lib.empty(20, dtype=lib.complex64).normal_(0.5, 2.0), lib.empty(4, dtype=lib.complex64).uniform_()]
    assert_same(both(draws, seed=22))


@pytest.mark.parametrize("seed", [0, 5, 2**32 - 1, 2**32 + 7, 67280421310721])
def test_twister_seeding_is_init_genrand_of_the_low_32_bits(seed):
    # numpy's legacy seeding (what RandomState(seed) runs) is PyTorch's mt19937 seeding
    from tapelab.core import cpu_stream
    bits = np.random.MT19937()
    cpu_stream.seed_twister(bits, seed)
    want = np.random.RandomState(seed & 0xFFFFFFFF).get_state()
    assert (bits.state["state"]["key"] == want[1]).all() and bits.state["state"]["pos"] == want[2] == 624


def test_half_and_bfloat16_normals_equal_torch():
    """ATen's half/bfloat16 ``normal_`` draws the whole blocks' 16 uniforms only and then the last
    16 positions' (float32 draws 16 fresh uniforms after all ``n``): 37 bfloat16 normals drew 53
    words here, 48 in torch, and the tail and every later number differed."""
    def draws(lib):
        return [lib.randn(n, dtype=getattr(lib, dt)).float() for dt in ("bfloat16", "float16") for n in (16, 21, 37, 100)] \
            + [lib.empty(5, 7, dtype=lib.float16).normal_(2.0, 3.0).float(), lib.rand(3)]
    assert_same(both(draws, seed=4))


def test_rrelu_slopes_equal_torch():
    """``rrelu``'s double U(lower, upper) takes bounds rounded to the input's math type (float32's 1/3)."""
    def draws(lib):
        x = lib.linspace(-3, 1, 40)
        return [lib.nn.functional.rrelu(x, training=True), lib.nn.RReLU(0.1, 0.3)(x), lib.nn.functional.rrelu(x.double(), training=True)]
    assert_same(both(draws, seed=2))
