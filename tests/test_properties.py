"""The five property checks: they pass what has the property and fail what has not."""

import pytest
import torch

import posenc as pe
from posenc import properties as P

SCHEMES = P.absolute_schemes()
EXPECTED = {  # from the definitions, property by property
    "integer": [True, False, False, True, False],
    "integer / length": [False, False, False, True, False],
    "binary": [True, False, True, True, False],
    "sinusoidal": [True, True, True, True, True],
    "learned": [True, False, False, False, False],
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_verdicts_for_the_absolute_schemes(name):
    verdicts = P.check_all(SCHEMES[name])
    assert [v.holds for v in verdicts.values()] == EXPECTED[name]


def _orbit(p, d, n, s):
    """E(p) = R^p v for one fixed random rotation R: linear by construction."""
    gen = torch.Generator().manual_seed(7)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
    v = torch.randn(d, generator=gen, dtype=torch.float64)
    return torch.stack([torch.linalg.matrix_power(q, int(i)) @ v for i in p])


def test_linear_check_passes_any_orbit_of_a_fixed_matrix():
    verdict = P.linear_relation(P.Scheme("orbit", _orbit))
    assert verdict.holds and verdict.evidence < 1e-9


def test_a_constant_encoding_is_not_unique():
    constant = P.Scheme("constant", lambda p, d, n, s: torch.ones(len(p), d))
    verdict = P.unique_and_length_independent(constant)
    assert not verdict.holds and verdict.evidence == 0


def test_a_random_draw_per_call_is_not_deterministic():
    noisy = P.Scheme(
        "noisy", lambda p, d, n, s: pe.sinusoidal_encoding(int(p.max()) + 1, d)[p] + s * 1e-3
    )
    assert not P.deterministic(noisy).holds
    assert P.deterministic(SCHEMES["sinusoidal"]).evidence == 0


def test_table_lists_every_scheme_and_property():
    table = P.format_table({n: P.check_all(s) for n, s in SCHEMES.items()})
    lines = table.splitlines()
    assert lines[0].split("  ")[0] == "scheme"
    assert [h.strip() for h in lines[0].split("  ") if h.strip()][1:] == list(P.PROPERTIES)
    assert all(line.startswith(name) for line, name in zip(lines[1:], SCHEMES, strict=True))
    assert lines[4].split()[1:] == ["✓"] * 5


def test_table_cells_are_the_rows_of_the_text_table():
    results = {n: P.check_all(s) for n, s in SCHEMES.items()}
    heading, rows = P.table_cells(results, evidence=True)
    assert heading == ["scheme", *P.PROPERTIES]
    text = P.format_table(results, evidence=True).splitlines()
    assert text[0].split() == " ".join(heading).split()
    for row, line in zip(rows, text[1:], strict=True):
        assert line.split() == " ".join(row).split()
    table = pe.table.Table(heading, rows, caption="The checks.")
    assert "<caption>The checks.</caption>" in table._repr_html_()


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
def test_every_number_is_relative_to_the_encodings_scale(scale):
    base = SCHEMES["binary"]
    scaled = P.Scheme("scaled", lambda p, d, n, s: base.encode(p, d, n, s) * scale)
    for check in P.PROPERTIES.values():
        assert check(scaled).evidence == pytest.approx(check(base).evidence, rel=1e-9)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: P.check_all("sinusoidal"), TypeError, "Scheme"),
        (
            lambda: P.linear_relation(SCHEMES["binary"], offsets=(60,)),
            ValueError,
            "need more than dim",
        ),
        (
            lambda: P.linear_relation(SCHEMES["binary"], offsets=(0,)),
            ValueError,
            "offset must be at least 1",
        ),
        (
            lambda: P.extends_to_n_dimensions(SCHEMES["binary"], dim=15),
            ValueError,
            "dim must be even",
        ),
        (
            lambda: P.extends_to_n_dimensions(SCHEMES["binary"], shift=(0, 0)),
            ValueError,
            "non-zero",
        ),
        (
            lambda: P.encodes_unseen_positions(SCHEMES["binary"], factor=1),
            ValueError,
            "factor must be at least 2",
        ),
        (
            lambda: P.unique_and_length_independent(SCHEMES["binary"], lengths=()),
            ValueError,
            "not be empty",
        ),
        (lambda: P.format_table({}), ValueError, "not be empty"),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
