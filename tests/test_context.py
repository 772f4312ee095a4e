"""Chapter 8's decomposition of ``q . k`` with additive encodings, and its helpers.

The four terms are checked against loops over the definition, their sum against the score
computed directly, and the facts the chapter relies on (content-content ignores position,
position-position ignores content, RoPE scores depend only on the offset) against
independent computations.
"""

import math

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc as pe
from posenc.book import context


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def draw(seed, *shape):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


@settings(max_examples=30, deadline=None)
@given(
    t=st.integers(1, 6),
    e=st.integers(1, 8),
    d=st.integers(1, 5),
    heads=st.sampled_from([None, 1, 3]),
    seed=st.integers(0, 2**31 - 1),
)
def test_the_four_terms_add_up_to_the_score(t, e, d, heads, seed):
    lead = () if heads is None else (heads,)
    content, position = draw(seed, 2, t, e)
    w_q, w_k = draw(seed + 1, 2, *lead, e, d)
    terms = context.score_terms(content, position, w_q, w_k)
    x = content + position  # [T, E]
    scores = (x @ w_q) @ (x @ w_k).mT  # the direct way
    assert scores.shape == (*lead, t, t)
    torch.testing.assert_close(terms.total(), scores)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_term_is_its_bilinear_form(seed):
    t, e, d = 4, 6, 3
    content, position = draw(seed, 2, t, e)
    w_q, w_k = draw(seed + 10, 2, e, d)
    terms = context.score_terms(content, position, w_q, w_k)
    sides = {"content": content, "position": position}
    for name, term in terms.named().items():
        left, right = name.split("-")
        for i in range(t):
            for j in range(t):
                q = sum(sides[left][i, a] * w_q[a] for a in range(e))  # [D]
                k = sum(sides[right][j, a] * w_k[a] for a in range(e))
                assert term[i, j].item() == pytest.approx(float(q @ k), rel=1e-10, abs=1e-12)


def test_zero_position_leaves_only_content_content():
    content = draw(0, 5, 6)
    w_q, w_k = draw(1, 2, 6, 4)
    terms = context.score_terms(content, torch.zeros_like(content), w_q, w_k)
    for term in terms[1:]:
        assert torch.equal(term, torch.zeros_like(term))
    torch.testing.assert_close(terms.content_content, (content @ w_q) @ (content @ w_k).T)


def test_content_content_ignores_positions_and_position_position_ignores_words():
    content, other, pos_a, pos_b = draw(3, 4, 5, 6)
    w_q, w_k = draw(4, 2, 6, 4)
    a = context.score_terms(content, pos_a, w_q, w_k)
    assert torch.equal(a.content_content, context.score_terms(content, pos_b, w_q, w_k)[0])
    assert torch.equal(a.position_position, context.score_terms(other, pos_a, w_q, w_k)[3])


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 6), heads=st.sampled_from([None, 2]), seed=st.integers(0, 2**31 - 1))
def test_pair_terms_are_entries_of_the_sequence_terms(m, heads, seed):
    e, d = 6, 4
    lead = () if heads is None else (heads,)
    dog, cat = draw(seed, 2, e)
    p_q, p_k = draw(seed + 1, 2, m, e)
    w_q, w_k = draw(seed + 2, 2, *lead, e, d)
    pair = context.pair_terms(dog, cat, p_q, p_k, w_q, w_k)
    assert pair.total().shape == (*lead, m)
    for row in range(m):
        # a two-token sequence: the dog at p_q[row], the cat at p_k[row]
        seq = context.score_terms(
            torch.stack([dog, cat]), torch.stack([p_q[row], p_k[row]]), w_q, w_k
        )
        for got, full in zip(pair, seq, strict=True):
            torch.testing.assert_close(got[..., row], full[..., 0, 1])


def test_pair_terms_accept_one_content_per_row():
    e = 4
    qc, kc, qp, kp = draw(5, 4, 3, e)
    w_q, w_k = draw(6, 2, e, 2)
    per_row = context.pair_terms(qc, kc, qp, kp, w_q, w_k)
    first = context.pair_terms(qc[0], kc[0], qp, kp, w_q, w_k)
    torch.testing.assert_close(per_row.total()[0], first.total()[0])


def test_term_rms_is_the_root_mean_square():
    terms = context.ScoreTerms(*draw(7, 4, 3, 5))
    rms = context.term_rms(terms)
    assert list(rms) == list(context.TERM_NAMES)
    for name, term in terms.named().items():
        expected = math.sqrt(sum(x * x for x in term.flatten().tolist()) / term.numel())
        assert rms[name] == pytest.approx(expected, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(positions=st.lists(st.integers(0, 300), min_size=1, max_size=6), seed=st.integers(0, 99))
def test_scaled_sinusoidal_is_the_encoding_at_the_mean_norm(positions, seed):
    like = draw(seed, 7, 16) * 0.03
    got = context.scaled_sinusoidal(positions, like)
    target = like.norm(dim=-1).mean()
    torch.testing.assert_close(got.norm(dim=-1), target.expand(len(positions)))
    table = pe.sinusoidal_encoding(max(positions) + 1, 16).double()
    direction = table[positions] / table[positions].norm(dim=-1, keepdim=True)
    torch.testing.assert_close(got / target, direction, atol=1e-6, rtol=1e-6)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 6), dim=st.integers(6, 12), seed=st.integers(0, 99))
def test_span_basis_spans_the_rows_and_removing_it_removes_them(n, dim, seed):
    rows = draw(seed, n, dim)
    basis = context.span_basis(rows)  # [E, k]
    assert basis.shape == (dim, n)
    torch.testing.assert_close(basis.T @ basis, torch.eye(n, dtype=torch.float64))
    keep = torch.eye(dim, dtype=torch.float64) - basis @ basis.T
    torch.testing.assert_close(rows @ keep, torch.zeros(n, dim, dtype=torch.float64))


def test_span_basis_takes_the_largest_directions_up_to_the_energy():
    rows = torch.diag(torch.tensor([3.0, 2.0, 1.0, 0.5]))  # energies 9, 4, 1, 0.25
    total = 14.25
    for energy, k in [(9 / total, 1), (9.01 / total, 2), (13 / total, 2), (13.5 / total, 3)]:
        basis = context.span_basis(rows, energy=energy)
        assert basis.shape == (4, k)
        torch.testing.assert_close(basis.abs(), torch.eye(4, dtype=torch.float64)[:, :k])
    assert context.span_basis(torch.zeros(2, 4) + torch.tensor([1.0, 0, 0, 0])).shape == (4, 1)


def test_seeded_projections_are_reproducible_and_scaled():
    w_q, w_k = context.seeded_projections(256, 256, seed=3)
    again = context.seeded_projections(256, 256, seed=3)
    assert torch.equal(w_q, again[0]) and torch.equal(w_k, again[1])
    assert not torch.equal(w_q, w_k)
    assert w_q.std().item() == pytest.approx(1 / 16, rel=0.02)
    heads = context.seeded_projections(8, 4, num_heads=3, dtype=torch.float64)
    assert heads[0].shape == (3, 8, 4) and heads[0].dtype == torch.float64


@settings(max_examples=20, deadline=None)
@given(
    m=st.integers(0, 500), n=st.integers(0, 500), shift=st.integers(0, 500), seed=st.integers(0, 99)
)
def test_rope_pair_scores_depend_on_the_offset_only(m, n, shift, seed):
    a, b = draw(seed, 2, 8)
    w_q, w_k = draw(seed + 1, 2, 8, 6)
    s = context.rope_pair_scores(a, b, [m, m + shift], [n, n + shift], w_q, w_k)
    torch.testing.assert_close(s[0], s[1], atol=1e-9, rtol=1e-9)


def test_rope_pair_scores_use_the_rope_matrices():
    a, b = draw(8, 2, 8)
    w_q, w_k = draw(9, 2, 8, 6)
    got = context.rope_pair_scores(a, b, [2, 9], [5, 4], w_q, w_k)
    for row, (m, n) in enumerate([(2, 5), (9, 4)]):
        q = pe.rope_matrix(m, 6) @ (a @ w_q)
        k = pe.rope_matrix(n, 6) @ (b @ w_k)
        assert got[row].item() == pytest.approx(float(q @ k), rel=1e-10)


def test_the_score_of_one_pair_moves_with_the_pair():
    """The chapter's claim on a fixed seed: same words, same offset, different scores."""
    dog, cat = draw(11, 2, 32)
    w_q, w_k = draw(12, 2, 32, 8)
    starts = list(range(20))
    p_q = context.scaled_sinusoidal(starts, torch.stack([dog, cat]))
    p_k = context.scaled_sinusoidal([s + 3 for s in starts], torch.stack([dog, cat]))
    pair = context.pair_terms(dog, cat, p_q, p_k, w_q, w_k)
    torch.testing.assert_close(pair.content_content, pair.content_content[:1].expand(20))
    spread = pair.total().max() - pair.total().min()
    assert spread > 0.1 * pair.content_content.abs().max()


def test_figures_draw():
    terms = context.ScoreTerms(*draw(0, 4, 3, 3))
    assert len(context.terms_figure(terms, ["a", "b", "c"]).axes) == 6
    pairs = context.ScoreTerms(*draw(1, 4, 5))
    fig = context.pair_terms_figure(list(range(5)), pairs, rope_scores=draw(2, 5))
    assert len(fig.axes[0].lines) == 6  # four terms, the sum, RoPE
    assert len(context.dot_product_figure((1.0, 0.0), (0.0, 2.0), 30.0).axes) == 2


def test_bad_input_raises_clear_errors():
    x, w = torch.zeros(3, 4), torch.zeros(4, 2)
    with pytest.raises(ValueError, match="must both end in \\[T, E\\]"):
        context.score_terms(x, torch.zeros(2, 4), w, w)
    with pytest.raises(ValueError, match="E=4"):
        context.score_terms(x, x, torch.zeros(5, 2), torch.zeros(5, 2))
    with pytest.raises(ValueError, match="one shape"):
        context.score_terms(x, x, w, torch.zeros(4, 3))
    with pytest.raises(TypeError, match=r"content must be a torch\.Tensor"):
        context.score_terms([[0.0]], x, w, w)
    with pytest.raises(ValueError, match="query_content must be \\[E\\] or \\[M, E\\]"):
        context.pair_terms(torch.zeros(5), torch.zeros(4), x, x, w, w)
    with pytest.raises(ValueError, match="one shape"):
        context.pair_terms(torch.zeros(4), torch.zeros(4), x, torch.zeros(2, 4), w, w)
    with pytest.raises(TypeError, match="terms must be a ScoreTerms"):
        context.term_rms((x, x, x, x))
    with pytest.raises(ValueError, match="E even"):
        context.scaled_sinusoidal([0], torch.zeros(2, 5))
    with pytest.raises(ValueError, match="positions must be non-negative"):
        context.scaled_sinusoidal([-1], x)
    with pytest.raises(ValueError, match="energy must be in"):
        context.span_basis(x, energy=1.5)
    with pytest.raises(ValueError, match="rows must hold a nonzero"):
        context.span_basis(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="rows must be \\[N, E\\]"):
        context.span_basis(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="in_dim must be at least 1"):
        context.seeded_projections(0, 2)
    with pytest.raises(TypeError, match="dtype must be a floating"):
        context.seeded_projections(2, 2, dtype=torch.int32)
    with pytest.raises(ValueError, match="one length"):
        context.rope_pair_scores(torch.zeros(4), torch.zeros(4), [0, 1], [0], w, w)
    with pytest.raises(ValueError, match="one vector"):
        context.rope_pair_scores(x, torch.zeros(4), [0], [0], w, w)
    with pytest.raises(ValueError, match="labels must have T=3"):
        context.terms_figure(context.ScoreTerms(*torch.zeros(4, 3, 3)), ["a"])
    with pytest.raises(ValueError, match="rope_scores must be \\[M\\]"):
        context.pair_terms_figure([0, 1], context.ScoreTerms(*torch.zeros(4, 2)), torch.zeros(3))
    with pytest.raises(ValueError, match="not both 0"):
        context.dot_product_figure((0.0, 0.0), (1.0, 0.0))
    with pytest.raises(TypeError, match="angle must be a finite number"):
        context.dot_product_figure(angle="90")
