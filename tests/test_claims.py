"""The claims (posenc.book.claims): every check reproduces its verdict and the appendix is
current; the summary (posenc.book.summary): the schemes' table and the road map; bad input."""

import copy
import dataclasses
import html
import itertools
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from mdit_py_plugins.deflist import deflist_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin
from myst_parser.mdit_to_docutils.base import default_slugify

from posenc import properties
from posenc.book import claim_checks, claims, claims_tables, summary

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = {claim.key: claim for claim in claims.CLAIMS}


# ----------------------------------------------------------------------------------------
# The claims
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("claim", claims.CLAIMS, ids=lambda c: c.key)
def test_each_check_reproduces_the_recorded_verdict(claim):
    if claim.chapter == 15:
        pytest.skip(
            "runs the 135M-parameter model: chapter 15 reports it and chapter 17 checks every "
            "verdict against the appendix, both under nbval"
        )
    finding = claims.check_claim(claim)
    assert finding.verdict == claim.verdict, finding.evidence
    assert finding.evidence


def _no_rotation(x, positions=None, **kwargs):
    return x.clone()


def _clockwise_formula(x, positions=None, *, base=10000.0):
    from posenc import rope

    p = torch.as_tensor(positions)
    return rope.apply_rope(x, -p, base=base, layout="interleaved")


# A broken library (or source formula) must change the verdict: each check can fail.
BREAKAGES = {
    "translation-invariant": ("posenc.book.claim_checks.apply_rope", _no_rotation),
    "relative-identity": ("posenc.book.claim_checks.apply_rope", _no_rotation),
    "dog-cat": ("posenc.book.claim_checks.apply_rope", _no_rotation),
    "key-rotation-typo": ("posenc.book.claim_checks.apply_rope", _no_rotation),
    "no-forced-decay": ("posenc.book.claim_checks.apply_rope", _no_rotation),
    "long-term-decay": (
        "posenc.book.frequencies.decay_bound",
        lambda q, k, dist: torch.full((q.shape[0], len(dist)), 1e9, dtype=q.dtype),
    ),
    "matrix-vs-elementwise": ("posenc.book.rope_views.elementwise_rope", _clockwise_formula),
    "unique-positions": (
        "posenc.book.frequencies.encoding_distance",
        lambda offsets, theta: torch.zeros(len(offsets), dtype=torch.float64),
    ),
    "axes-apart": ("posenc.book.rope_nd_views.apply_rope_nd", "axial RoPE turns nothing"),
}


def _grid_where(change):
    """The stored training grid with ``change(run)`` applied to a copy of every run."""
    from posenc import train

    grid = copy.deepcopy(train.stored())
    for run in grid["runs"]:
        change(run)
    return lambda: grid


def _set(encodings, multiple, value, task=None):
    def change(run):
        if run["encoding"] in encodings and task in (None, run["task"]):
            run["accuracy"][multiple] = value if value is not None else run["accuracy"]["1x"]

    return change


def _slow_rope(run):
    if run["encoding"] in ("rope", "p-rope"):
        run["loss_curve"] = [100 * v for v in run["loss_curve"]]


# The training grid's claims: a grid in which the models behaved otherwise changes the verdict.
_GRID = "posenc.book.claim_checks._grid"
BREAKAGES.update(
    {
        "absolute-poor-beyond": (_GRID, _grid_where(_set(("learned", "sinusoidal"), "2x", None))),
        "relative-better": (_GRID, _grid_where(_set(("rope",), "4x", 0.9))),
        "excellent-generalisation": (_GRID, _grid_where(_set(("rope",), "4x", 0.99))),
        "sinusoidal-extrapolates": (_GRID, _grid_where(_set(("sinusoidal",), "2x", 0.9))),
        "rope-boost": (_GRID, _grid_where(_slow_rope)),
    }
)


@pytest.mark.parametrize("key", BREAKAGES)
def test_a_check_gives_another_verdict_when_what_it_checks_is_broken(key, monkeypatch):
    target, broken = BREAKAGES[key]
    if key == "axes-apart":  # the default rotation of pairwise_scores, bound when defined
        from posenc.book import rope_nd_views as views

        scores = views.pairwise_scores

        def broken(q, k, cells, rotate=views.apply_rope_nd):
            if rotate is views.apply_rope_nd:  # axial RoPE turns nothing
                return (q @ k).expand(len(cells), len(cells))
            return scores(q, k, cells, rotate)

        target = "posenc.book.rope_nd_views.pairwise_scores"
    monkeypatch.setattr(target, broken)
    finding = claims.check_claim(CLAIMS[key])
    assert finding.verdict != CLAIMS[key].verdict, finding.evidence


# A yes or no in the evidence carries the value it was drawn from: "< 1e-12 (allclose: yes)".
# Each listed phrase ends in a yes or no that is itself the fact (a structural one, or an
# integer equality whose integers are printed), or one drawn from the trained model's
# weights, which differ between the Hub's copy and the offline one.
STRUCTURAL = (
    "offset 3 in both",
    "1 of 2 and 50 of 100 share a vector",
    "'Dog' the same token in both",
    "those with m = n",
)
FROM_THE_MODEL = (
    "key norm than the fastest",
    "rotation perplexity over 3x",
    "attention to the previous token",
)
_VERDICT = re.compile(r": (yes|no)\b")
# a measured value right before the parenthesis that holds its verdict
_VALUE = re.compile(r"(?:[<>] )?[+-]?\d+(?:\.\d+)?(?:e[+-]\d+)?(?: or more)? \([^()]*$")


def bare_verdicts(evidence: str, allowed: tuple[str, ...] = STRUCTURAL) -> list[str]:
    """The text before each yes or no of ``evidence`` that prints no value beside it."""
    bare = []
    for match in _VERDICT.finditer(evidence):
        before = evidence[: match.start()]
        if not _VALUE.search(before) and not before.endswith(allowed):
            bare.append(before.rsplit(";", 1)[-1].strip())
    return bare


def test_a_bare_verdict_in_evidence_would_be_caught():
    evidence = (
        "outputs: largest difference < 1e-06 (allclose: yes); with a causal mask: no; "
        "ratio 49 (over 10: yes); R_7 = R_(n-m): yes; margin -0.11 (above: no); "
        "0.33 or more (apart: yes); 'Dog' the same token in both: no"
    )
    assert bare_verdicts(evidence) == ["with a causal mask", "R_7 = R_(n-m)"]


def _evidence_of_every_check():
    """The evidence of every claim but one: the shift in the trained model needs the model
    (chapter 15 shows it); the model's other two are written from stored runs and facts."""
    from posenc.book import long_text

    facts = {"slow heavier": True, "fast costly": True, "heads lose": True}
    found = {c.key: claims.check_claim(c).evidence for c in claims.CLAIMS if c.chapter != 15}
    found["p-rope-in-a-model"] = claim_checks._p_rope_finding(long_text.stored(), facts).evidence
    found["generalisation-in-a-model"] = claim_checks._generalisation_finding(
        long_text.stored()
    ).evidence
    return found


def test_every_yes_or_no_of_the_evidence_prints_its_value():
    found = _evidence_of_every_check()
    bare = {
        key: b
        for key, text in found.items()
        if (b := bare_verdicts(text, STRUCTURAL + FROM_THE_MODEL))
    }
    assert bare == {}


def test_the_evidence_is_the_same_at_any_thread_count():
    """Round-off that changes with the thread count (float32 outputs of attention, whose
    rows may or may not come out bitwise equal) stays under the printed floors."""
    keys = [c.key for c in claims.CLAIMS if c.chapter not in (15, 16)]
    before = torch.get_num_threads()
    try:
        texts = []
        for threads in (1, 2):  # on 2 threads the equal rows differ by round-off here
            torch.set_num_threads(threads)
            texts.append({key: claims.check_claim(CLAIMS[key]).evidence for key in keys})
    finally:
        torch.set_num_threads(before)
    assert texts[0] == texts[1]


# Every claim of DESIGN.md section 7, and the key of the claim that covers it.
DESIGN_CLAIMS = {
    "equal tokens give equal outputs (to tolerance, not bitwise)": "identical-outputs",
    "the (sin, cos) shift matrix is [[cos, sin], [-sin, cos]]": "shift-matrix",
    "the same matrix for RoPE turns the other way than the formula": "matrix-vs-elementwise",
    "R_m^T R_n = R_(n-m), one source writes R_(m-n)": "rotation-index",
    "a source describes interleaved pairs but its code splits halves": "concept-note-code",
    "2 pi x 10000 unique positions, about 63,000": "unique-positions",
    "attention decays with distance": "long-term-decay",
    "RoPE generalises excellently to longer sequences": "excellent-generalisation",
    "the MSB cycles every 2^(n-1) tokens": "msb-cycle",
    "252 = 11111100": "binary-252",
    "the exponent 2i/d runs to (d-2)/d, not to d/2 - 1": "exponent-range",
}


@pytest.mark.parametrize("key", DESIGN_CLAIMS.values())
def test_every_claim_the_design_asks_for_is_checked(key):
    assert key in CLAIMS


@pytest.mark.parametrize(
    ("key", "verdict"),
    [
        ("identical-outputs", claim_checks.CAVEAT),
        ("shift-matrix", claim_checks.HOLDS),
        ("matrix-vs-elementwise", claim_checks.WRONG),
        ("rotation-index", claim_checks.WRONG),
        ("unique-positions", claim_checks.WRONG),
        ("long-term-decay", claim_checks.CAVEAT),
        ("excellent-generalisation", claim_checks.WRONG),
        ("msb-cycle", claim_checks.CAVEAT),
        ("binary-252", claim_checks.HOLDS),
        ("exponent-range", claim_checks.WRONG),
    ],
)
def test_verdicts_of_the_design_claims(key, verdict):
    assert CLAIMS[key].verdict == verdict


def test_a_report_says_the_claim_and_what_its_check_found():
    """The box a chapter shows: the source's name and the claim, then the verdict its check
    finds and the evidence, as text and as HTML with the text escaped."""
    report = claims.report("concept-note-code")
    claim = CLAIMS["concept-note-code"]
    text, evidence = str(report), claims.check_claim(claim).evidence
    assert text == (
        f"Claim ({claims.SOURCES[claim.source]}): {claim.title}\n"
        f"Verdict: {claim.verdict} — {evidence}"
    )
    page = report._repr_html_()
    assert f"<strong>Verdict: {claim.verdict}</strong> — {html.escape(evidence)}" in page
    assert "(x_i, x_i+D/2): &lt; 1e-12" in page
    assert "R_(n-m) k&gt; on 41 x 41" in claims.report("relative-identity")._repr_html_()


def test_a_report_refuses_a_verdict_the_book_no_longer_finds(monkeypatch):
    claim = CLAIMS["binary-252"]
    drifted = dataclasses.replace(claim, verdict=claim_checks.WRONG)
    monkeypatch.setattr(claims, "CLAIMS", [drifted if c is claim else c for c in claims.CLAIMS])
    with pytest.raises(ValueError, match="the check of 'binary-252' finds 'holds'"):
        claims.report("binary-252")
    with pytest.raises(ValueError, match="key must be the key of a claim"):
        claims.report("binary-253")
    with pytest.raises(TypeError, match="key must be a str"):
        claims.report(252)


def test_claims_are_well_formed_and_in_chapter_order():
    assert len(CLAIMS) == len(claims.CLAIMS), "claim keys must be unique"
    chapters = [c.chapter for c in claims.CLAIMS]
    assert chapters == sorted(chapters)
    for claim in claims.CLAIMS:
        assert claim.verdict in claim_checks.VERDICTS
        assert claim.source in claims.SOURCES
        assert claim.title and claim.statement and claim.finding
        assert re.fullmatch(r"[a-z0-9_-]+", claim.section), claim.section


def test_every_source_is_in_the_bibliography():
    bib = (ROOT / "book" / "references.bib").read_text()
    keys = set(re.findall(r"^@\w+\{([^,]+),", bib, flags=re.M))
    assert set(claims.SOURCES) <= keys


def test_every_source_has_a_claim():
    assert {c.source for c in claims.CLAIMS} == set(claims.SOURCES)


def myst_slugs(path: Path) -> set[str]:
    """The heading anchors MyST makes for a notebook, computed with MyST's own parser and
    slug function: the text and inline code of the heading (levels 1 to 3), math left out."""
    md = MarkdownIt("commonmark").use(dollarmath_plugin)
    slugs = set()
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        tokens = md.parse("".join(cell["source"]))
        for opening, inline in itertools.pairwise(tokens):
            if opening.type == "heading_open" and opening.tag in ("h1", "h2", "h3"):
                title = "".join(
                    child.content
                    for child in inline.children or []
                    if child.type in ("text", "code_inline")
                )
                slug, i = default_slugify(title), 1
                while slug in slugs:
                    slug, i = f"{default_slugify(title)}-{i}", i + 1
                slugs.add(slug)
    return slugs


@pytest.mark.parametrize("claim", claims.CLAIMS, ids=lambda c: c.key)
def test_each_claim_links_to_an_existing_heading(claim):
    (path,) = (ROOT / "notebooks").glob(f"{claim.chapter:02d}_*.ipynb")
    assert claim.section in myst_slugs(path), f"no heading #{claim.section} in {path.name}"


def test_claims_appendix_is_current():
    page = (ROOT / "book" / "claims.md").read_text()
    start = page.index(claims_tables.CLAIMS_BEGIN)
    end = page.index(claims_tables.CLAIMS_END) + len(claims_tables.CLAIMS_END)
    assert page[start:end] == claims_tables.claims_markdown(), (
        "book/claims.md is out of date: run "
        "python -c \"from posenc.book import claims_tables; claims_tables.update_claims_page('book/claims.md')\""
    )


def test_claims_markdown_has_one_block_per_claim_with_its_link():
    """The appendix renders as one definition (claim, then verdict, finding and link) per
    claim, grouped by source: text that wraps in the column, and no table that could not."""
    text = claims_tables.claims_markdown()
    md = MarkdownIt("commonmark").use(dollarmath_plugin).use(deflist_plugin).enable("table")
    tokens = md.parse(text)
    assert not [t for t in tokens if t.type == "table_open"], "a table does not wrap"
    terms = [b for a, b in itertools.pairwise(tokens) if a.type == "dt_open"]
    assert sum(t.type == "dd_open" for t in tokens) == len(terms)
    order = list(claims.SOURCES)  # the appendix groups the claims by source
    grouped = sorted(claims.CLAIMS, key=lambda c: order.index(c.source))
    assert len(terms) == len(grouped)
    blocks = [line for line in text.splitlines() if line.startswith(": ")]
    assert len(blocks) == len(grouped)
    for term, block, claim in zip(terms, blocks, grouped, strict=True):
        assert re.sub(r"[\s$]", "", term.content) == re.sub(r"[\s$]", "", claim.statement)
        assert block.startswith(f": **{claim.verdict}.** ")
        assert f"(../notebooks/{claim.chapter:02d}_" in block
        assert block.endswith(f"#{claim.section}).")


def test_update_claims_page_rewrites_only_between_the_markers(tmp_path):
    page = tmp_path / "claims.md"
    page.write_text(
        f"# Title\n\nbefore\n{claims_tables.CLAIMS_BEGIN}\nOLD-TABLE\n{claims_tables.CLAIMS_END}\nafter\n"
    )
    one = [CLAIMS["binary-252"]]
    assert claims_tables.update_claims_page(page, one) is True
    text = page.read_text()
    assert text.startswith("# Title\n\nbefore\n") and text.endswith("\nafter\n")
    assert "OLD-TABLE" not in text and "11111100" in text
    assert claims_tables.update_claims_page(page, one) is False


def test_source_tally_counts_every_finding():
    findings = {key: claim_checks.Finding(claim.verdict, "") for key, claim in CLAIMS.items()}
    tally = claims_tables.source_tally(findings)
    assert sum(sum(c.values()) for c in tally.values()) == len(CLAIMS)
    assert list(tally) == [s for s in claims.SOURCES if s in tally]
    for source, counts in tally.items():
        for verdict in claim_checks.VERDICTS:
            expected = sum(c.source == source and c.verdict == verdict for c in claims.CLAIMS)
            assert counts[verdict] == expected
    table = claims_tables.format_source_tally(tally)
    assert table.columns == ["source", "holds", "with a caveat", "wrong"]
    assert [row[0] for row in table.rows] == [claims.SOURCES[s] for s in tally]
    assert [[int(n) for n in row[1:]] for row in table.rows] == [
        [c[v] for v in claim_checks.VERDICTS] for c in tally.values()
    ]


def test_format_findings_lists_only_the_asked_verdicts():
    findings = {key: claim_checks.Finding(claim.verdict, "e") for key, claim in CLAIMS.items()}
    table = claims_tables.format_findings(findings, verdicts=[claim_checks.WRONG])
    wrong = [c for c in claims.CLAIMS if c.verdict == claim_checks.WRONG]
    assert [row[2] for row in table.rows] == [c.title for c in wrong]
    assert [row[0] for row in table.rows] == [str(c.chapter) for c in wrong]
    assert "are wrong" in table.caption


# Slugs: claims_tables.slugify against MyST itself.

SEGMENTS = st.one_of(
    st.text(alphabet="abcXYZ019 ,.:?()'-", min_size=1, max_size=8),
    st.text(alphabet="abxy_0", min_size=1, max_size=4).map(lambda s: f"${s}$"),
    st.text(alphabet="abxy_0", min_size=1, max_size=4).map(lambda s: f"`{s}`"),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(SEGMENTS, min_size=1, max_size=5))
def test_slugify_agrees_with_myst(segments):
    title = " ".join(segments).strip()
    tokens = MarkdownIt("commonmark").use(dollarmath_plugin).parse(f"# {title}")
    if len(tokens) < 2 or tokens[0].type != "heading_open":
        return
    expected = default_slugify(
        "".join(c.content for c in tokens[1].children if c.type in ("text", "code_inline"))
    )
    assert claims_tables.slugify(title) == expected


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Solving for $M$", "solving-for-"),
        ("$M_k$ is a rotation", "-is-a-rotation"),
        ("Which way does it turn?", "which-way-does-it-turn"),
        ("`posenc` against transformers", "posenc-against-transformers"),
    ],
)
def test_slugify_examples(title, slug):
    assert claims_tables.slugify(title) == slug


# ----------------------------------------------------------------------------------------
# Schemes, table, road
# ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def results():
    return {name: properties.check_all(s) for name, s in summary.all_schemes().items()}


def test_all_schemes_cover_every_family_and_chapter(results):
    assert list(results) == list(summary.SCHEME_INFO)
    assert {family for _, family in summary.SCHEME_INFO.values()} == {
        "absolute",
        "relative",
        "rotary",
    }


def test_scheme_table_agrees_with_the_properties_table(results):
    ours = summary.scheme_table(results, evidence=True).rows
    theirs = properties.format_table(results, evidence=True).splitlines()[1:]
    for mine, other, name in zip(ours, theirs, results, strict=True):
        assert mine[0] == name and other.startswith(name)
        assert mine[3:8] == re.findall(r"[✓✗] \S+", other)  # marks and measured numbers
        assert mine[-1] == f"{sum(cell.startswith('✓') for cell in mine[3:8])} of 5"
    assert [row[3:8] for row in summary.scheme_table(results).rows] == [
        [cell[0] for cell in row[3:8]] for row in ours
    ]


@pytest.mark.parametrize(
    ("name", "passed"),
    [("sinusoidal", 5), ("RoPE", 5), ("RoPE, Llama 3.2", 5), ("ALiBi", 5), ("T5", 0)],
)
def test_scheme_verdicts(results, name, passed):
    assert sum(v.holds for v in results[name].values()) == passed


def test_llama32_rope_scheme_turns_with_llama_frequencies():
    import torch

    from posenc.rope import rope_inv_freq
    from posenc.scaling import llama3_inv_freq

    scheme = summary.llama32_rope_scheme()
    table = scheme(torch.arange(5), 16, 5)  # [T, D] float64
    theta = llama3_inv_freq(rope_inv_freq(16, 500000.0)).double()
    angles = torch.atan2(table[:, 1::2], table[:, 0::2])  # [T, D/2]
    expected = torch.remainder(
        torch.arange(5.0, dtype=torch.float64)[:, None] * theta, 2 * torch.pi
    )
    wrapped = torch.remainder(angles, 2 * torch.pi)
    assert torch.allclose(wrapped, expected, atol=1e-6)
    assert torch.allclose(table.norm(dim=-1), torch.ones(5, dtype=torch.float64))


def test_road_visits_the_chapters_in_order_and_names_real_schemes():
    chapters = [station.chapter for station in summary.ROAD]
    assert chapters == sorted(chapters)
    assert set(range(1, 13)) <= set(chapters)
    names = {name for station in summary.ROAD for name in station.schemes}
    assert names == set(summary.SCHEME_INFO)


def test_road_map_draws_one_square_per_verdict(results):
    fig = summary.road_map_figure(results)
    try:
        squares = [p for p in fig.axes[0].patches if p.get_width() < 0.1]
        verdicts = sum(len(s.schemes) for s in summary.ROAD) * 5
        assert len(squares) == verdicts
    finally:
        plt.close(fig)


# ----------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------


def test_bad_input_raises_clear_errors(results):
    with pytest.raises(TypeError, match="claim must be a Claim"):
        claims.check_claim("msb-cycle")
    with pytest.raises(ValueError, match="max_distance must be at least 1"):
        summary.all_schemes(0)
    with pytest.raises(ValueError, match="must not be empty"):
        summary.scheme_table({})
    with pytest.raises(ValueError, match="no chapter in SCHEME_INFO"):
        summary.scheme_table({"mystery": results["binary"]})
    with pytest.raises(ValueError, match="no verdicts for the schemes"):
        summary.road_map_figure({})
    with pytest.raises(ValueError, match="at least one station"):
        summary.road_map_figure(results, [])
    with pytest.raises(TypeError, match="Station objects"):
        summary.road_map_figure(results, ["binary"])
    with pytest.raises(ValueError, match="verdicts must be among"):
        claims_tables.format_findings({}, verdicts=["maybe"])
    with pytest.raises(ValueError, match="unknown claims"):
        claims_tables.source_tally({"nope": claim_checks.Finding(claim_checks.HOLDS, "")})
    with pytest.raises(ValueError, match="must not be empty"):
        claims_tables.format_source_tally({})
    with pytest.raises(TypeError, match="title must be a str"):
        claims_tables.slugify(3)


def test_a_check_that_misbehaves_is_caught():
    def bad_verdict():
        return claim_checks.Finding("maybe", "")

    def not_a_finding():
        return "holds"

    base = CLAIMS["binary-252"]
    fields = {f: getattr(base, f) for f in base.__dataclass_fields__}
    with pytest.raises(ValueError, match="returned verdict 'maybe'"):
        claims.check_claim(claims.Claim(**{**fields, "check": bad_verdict}))
    with pytest.raises(TypeError, match="returned str"):
        claims.check_claim(claims.Claim(**{**fields, "check": not_a_finding}))
    with pytest.raises(ValueError, match="unique"):
        claims.check_claims([base, base])


def test_appendix_needs_the_markers_and_real_sections(tmp_path):
    page = tmp_path / "claims.md"
    page.write_text("# Claims\n")
    with pytest.raises(ValueError, match="must hold the markers"):
        claims_tables.update_claims_page(page)
    base = CLAIMS["binary-252"]
    fields = {f: getattr(base, f) for f in base.__dataclass_fields__}
    with pytest.raises(ValueError, match="has no heading with anchor 'nowhere'"):
        claims_tables.claims_markdown([claims.Claim(**{**fields, "section": "nowhere"})])
    with pytest.raises(ValueError, match="expected one notebook for chapter 99"):
        claims_tables.claims_markdown([claims.Claim(**{**fields, "chapter": 99})])
