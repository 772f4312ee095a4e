"""Every claim of the sources the book checks: what it says, who says it, and its verdict.

Each :class:`Claim` carries its source, the book's verdict and finding, the chapter section
whose cells show it, and its ``check`` from :mod:`posenc.book.claim_checks`: the one function
that settles it. The chapter that discusses a claim runs it (:func:`report`), chapter 17
runs all of them (:func:`check_claims`), and the "Claims checked" appendix is written from
the same records (:mod:`posenc.book.claims_tables`).

Verdicts are one of :data:`~posenc.book.claim_checks.VERDICTS`: ``"holds"``,
``"holds with a caveat"``, ``"wrong"``.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from posenc._validate import _got, check_sequence
from posenc.book import claim_checks as cc
from posenc.book.claim_checks import CAVEAT, HOLDS, VERDICTS, WRONG, Finding

__all__ = [
    "CLAIMS",
    "SOURCES",
    "Claim",
    "ClaimReport",
    "check_claim",
    "check_claims",
    "report",
]


SOURCES: dict[str, str] = {
    "fleetwood2024designing": "Hugging Face post",
    "source2025concept": "concept note",
    "source2025interactive": "interactive page",
    "source2025ropeblog": "RoPE blog post",
    "vaswani2017attention": "Vaswani et al.",
    "shaw2018self": "Shaw et al.",
    "raffel2020exploring": "T5 paper",
    "press2022train": "ALiBi paper",
    "su2024roformer": "RoFormer",
    "chen2023extending": "Chen et al.",
    "peng2024yarn": "YaRN paper",
    "barbero2025round": "Barbero et al.",
    "wang2024qwen2vl": "Qwen2-VL",
}
"""``{bibtex key: short name}`` of every source a claim comes from, in the book's order."""


@dataclass(frozen=True)
class Claim:
    """A claim of a source that the book checks.

    Attributes:
        key: short identifier.
        source: bibtex key of the source (a key of :data:`SOURCES`).
        title: the claim in a few plain words, for printed tables.
        statement: the claim in the book's words (MyST markdown, may hold math).
        verdict: the book's verdict, one of :data:`VERDICTS`.
        finding: what the book found (MyST markdown).
        chapter: the chapter whose executed cells show it.
        section: the heading anchor (slug) of that chapter's section.
        check: a function of no arguments that checks the claim again and returns a
            :class:`Finding`; its verdict must equal ``verdict``.
    """

    key: str
    source: str
    title: str
    statement: str
    verdict: str
    finding: str
    chapter: int
    section: str
    check: Callable[[], Finding]


_HF = "fleetwood2024designing"


_NOTE = "source2025concept"


_PAGE = "source2025interactive"


_BLOG = "source2025ropeblog"


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "equivariance",
        _HF,
        "attention is permutation-equivariant",
        "Self-attention is permutation-equivariant: shuffle the tokens and the outputs are "
        "shuffled the same way.",
        HOLDS,
        "Checked on 20 random permutations.",
        1,
        "attention-cannot-see-order",
        cc._check_equivariance,
    ),
    Claim(
        "identical-outputs",
        _HF,
        "equal tokens get identical outputs",
        "Without position information the two *dog* tokens of *The dog chased another dog* "
        "get identical outputs.",
        CAVEAT,
        "Equal to float32 rounding (`allclose`), not always to the last bit, and only in "
        "attention without a mask, as the source runs it. With the causal mask of a decoder "
        "such as Llama the two differ: the second dog sees more tokens.",
        1,
        "the-dog-demonstration",
        cc._check_equal_outputs,
    ),
    Claim(
        "integer-swamps",
        _HF,
        "the integer position drowns the token",
        "Adding the integer position to the embedding swamps the token's own signal.",
        HOLDS,
        "$\\lVert PE(1) \\rVert = \\sqrt{2048} \\approx 45$, more than ten times a token "
        "embedding; every sum points along $(1, \\dots, 1)$.",
        3,
        "the-position-itself",
        cc._check_integer_swamps,
    ),
    Claim(
        "length-normalised",
        _HF,
        "p / N changes with the length",
        "Dividing by the sequence length gives the same position different vectors in "
        "sequences of different lengths.",
        HOLDS,
        "Position 5 gets 0.5 at $N = 10$ and 0.0005 at $N = 10000$; "
        "1 of 2 and 50 of 100 share a vector.",
        3,
        "divide-by-the-length",
        cc._check_length_normalised,
    ),
    Claim(
        "binary-252",
        _HF,
        "252 is 11111100 in binary",
        "Position 252 in binary is `11111100`.",
        HOLDS,
        "Written most significant bit first; the encoding stores the least "
        "significant bit in feature 0, so its features read `00111111`.",
        3,
        "binary",
        cc._check_binary_252,
    ),
    Claim(
        "msb-cycle",
        _HF,
        "the MSB cycles every 2^(n-1) tokens",
        "The most significant of $n$ bits cycles every $2^{n-1}$ tokens.",
        CAVEAT,
        "It *flips* every $2^{n-1}$ positions; a full cycle (back to the same "
        "pattern) takes $2^n$.",
        3,
        "how-often-each-bit-flips",
        cc._check_msb_cycle,
    ),
    Claim(
        "sine-alone",
        _PAGE,
        "with sine alone, positions 0 and pi both give 0",
        "With sine alone, positions $0$ and $\\pi$ would both give $0$, so the cosine is needed.",
        CAVEAT,
        "The point holds: $\\sin a = \\sin(\\pi - a)$, so sine alone confuses nearby values. "
        "The example does not: positions are integers, no two share a sine exactly, and "
        "$\\pi$ is not a position.",
        4,
        "sine-alone-is-ambiguous",
        cc._check_sine_alone,
    ),
    Claim(
        "exponent-range",
        _BLOG,
        "2i/d runs from 0 to d/2 - 1",
        "The exponent $2i/d_{model}$ of the sinusoidal encoding runs from $0$ to $d/2 - 1$.",
        WRONG,
        "The *index* $i$ runs to $d/2 - 1$; the exponent runs to $(d-2)/d < 1$. Read "
        "as written, most frequencies of a 512-feature encoding would be 0.",
        5,
        "the-exponent-stops-short-of-1",
        cc._check_exponent_range,
    ),
    Claim(
        "log-space",
        _PAGE,
        "base^(2i/d) overflows: use log space",
        "Computing $10000^{2i/d_{model}}$ directly can overflow, so the frequencies are "
        "computed in log space.",
        WRONG,
        "Not for the base 10000 it names: nothing overflows in float16 or float32. Overflow "
        "needs float16 and a base above 65504 (Llama's 500000), where log space does help; in "
        "float32 the direct form is the more accurate.",
        5,
        "why-the-frequencies-are-computed-in-log-space",
        cc._check_log_space,
    ),
    Claim(
        "note-sinusoidal-code",
        _NOTE,
        "the log-space code computes the encoding",
        "The note's code, with frequencies $\\exp(-2i \\ln 10000 / d)$, computes the "
        "sinusoidal encoding.",
        HOLDS,
        "It agrees with the formula to float32 rounding of the angles.",
        5,
        "why-the-frequencies-are-computed-in-log-space",
        cc._check_concept_note_sinusoidal,
    ),
    Claim(
        "low-dims-slow",
        _NOTE,
        "low dimensions change slowly, high ones fast",
        "In the sinusoidal encoding the lower dimensions change slowly over positions and the "
        "higher ones oscillate faster.",
        WRONG,
        "The reverse: pair $i$ turns at $10000^{-2i/d}$, so the first features change fastest "
        "(every position) and the last ones slowest.",
        5,
        "seeing-the-encoding",
        cc._check_low_dims_slow,
    ),
    Claim(
        "cyclical",
        _NOTE,
        "sinusoidal encodings fail on longer inputs because they are cyclical",
        "The sinusoidal encoding struggles with sequences longer than those seen in training "
        "because of its cyclical nature.",
        WRONG,
        "The failure is real, the cause is not. Each pair repeats, the whole vector does "
        "not: no two positions within 100,000 of each other share an encoding, and "
        "neighbours stay the closest pair. Yet a model trained from scratch with it copies "
        "0.99 of a sequence at its training length and 0.19-0.21 at twice it (chapter 16): "
        "what fails is the model, which never saw those vectors.",
        5,
        "the-dot-product-sees-only-the-offset",
        cc._check_cyclical,
    ),
    Claim(
        "longest-wavelength",
        _PAGE,
        "the last pair's wavelength is 2 pi 10000",
        "The last pair of the sinusoidal encoding has wavelength $2\\pi \\cdot 10000 "
        "\\approx 62{,}832$.",
        CAVEAT,
        "That is the limit as $d$ grows; the last pair has "
        "$2\\pi \\cdot 10000^{(d-2)/d}$: 54,410 for $d = 128$, 60,611 for $d = 512$.",
        5,
        "wavelengths",
        cc._check_longest_wavelength,
    ),
    Claim(
        "linear-offset",
        "vaswani2017attention",
        "PE(p+k) is linear in PE(p)",
        "For any fixed offset $k$, $PE(p + k)$ is a linear function of $PE(p)$.",
        HOLDS,
        "The map is a block-diagonal rotation $M_k$, the same for every $p$; checked "
        "for 12,224 pairs of positions.",
        6,
        "every-position-every-offset-every-frequency",
        cc._check_linear_offset,
    ),
    Claim(
        "shift-matrix",
        _HF,
        "the shift matrix is [[cos, sin], [-sin, cos]]",
        "Shifting a $(\\sin \\omega p, \\cos \\omega p)$ pair by $k$ is multiplication by "
        "$\\begin{bmatrix} \\cos \\omega k & \\sin \\omega k \\\\ -\\sin \\omega k & "
        "\\cos \\omega k \\end{bmatrix}$.",
        HOLDS,
        "Derived with sympy and checked numerically. It is the *clockwise* rotation "
        "$R(-\\omega k)$, because the pair lists $\\sin$ first.",
        6,
        "solving-for-",
        cc._check_shift_matrix,
    ),
    Claim(
        "rotation-index",
        _PAGE,
        "R_m^T R_n = R_(m-n)",
        "$R_m^\\top R_n = R_{m-n}$, so the score depends on the distance $m - n$.",
        WRONG,
        "$R_m^\\top R_n = R_{n-m}$ (the page writes it correctly further on); "
        "$R_{m-n}$ fits only where $m = n$.",
        6,
        "a-query-at--a-key-at-",
        cc._check_rotation_index,
    ),
    Claim(
        "note-shaw-tensors",
        _NOTE,
        "Shaw attention with L x L x d tensors",
        "Relative attention adds learned $L \\times L \\times d$ tensors $A^K$ and $A^V$ to "
        "the keys and values: $\\operatorname{softmax}(Q (K + A^K)^\\top / \\sqrt{d})"
        "(V + A^V)$.",
        HOLDS,
        "Read row by row, it is Shaw et al.'s attention; each tensor holds only "
        "$2c + 1$ different vectors (clipping distance $c$).",
        7,
        "shaw-et-al-vectors-for-offsets",
        cc._check_shaw_tensors,
    ),
    Claim(
        "shaw-clipping",
        "shaw2018self",
        "clipped offsets share a vector",
        "Offsets beyond the clipping distance $c$ share one learned vector, so $2c + 1$ "
        "vectors serve sequences of any length.",
        HOLDS,
        "The table row of every pair is $\\operatorname{clip}(j - i, -c, c) + c$.",
        7,
        "shaw-et-al-vectors-for-offsets",
        cc._check_shaw_clipping,
    ),
    Claim(
        "t5-buckets",
        "raffel2020exploring",
        "offsets share a bucket beyond 128",
        "32 buckets whose ranges grow logarithmically up to an offset of 128, beyond which "
        "all offsets share one bucket.",
        CAVEAT,
        "In the encoder (two directions) every offset from 91 on already shares the "
        "last bucket, and one of the 32 buckets is never used.",
        7,
        "t5-one-number-per-bucket-of-offsets",
        cc._check_t5_buckets,
    ),
    Claim(
        "alibi-slopes",
        "press2022train",
        "ALiBi's slopes are 2^(-8h/H)",
        "The head slopes form a geometric sequence starting at $2^{-8/H}$.",
        CAVEAT,
        "For $H$ a power of two, as for 8 heads: $1/2, 1/4, \\dots, 1/256$. For other head "
        "counts the paper's code interleaves two such sequences, which is not geometric.",
        7,
        "alibi-a-penalty-that-grows-with-distance",
        cc._check_alibi_slopes,
    ),
    Claim(
        "translation-invariant",
        _PAGE,
        "RoPE makes attention translation-invariant",
        "Because the score depends only on $R_{n-m}$, RoPE makes attention translation-invariant.",
        HOLDS,
        "Moving a whole sequence leaves RoPE's attention unchanged (to float64 "
        "rounding), as for Shaw, T5 and ALiBi; absolute encodings change it.",
        7,
        "the-measurement-move-the-whole-sequence",
        cc._check_translation_invariance,
    ),
    Claim(
        "additive-pollutes",
        _HF,
        "added positions pollute the content",
        "Adding a position vector to the token mixes position into content: the score of "
        "two words depends on where they stand.",
        HOLDS,
        "The same two words three apart score differently at every placement; three "
        "of the four terms of $q \\cdot k$ involve position.",
        8,
        "same-words-same-distance-different-place",
        cc._check_additive_pollutes,
    ),
    Claim(
        "norm-carries-meaning",
        _HF,
        "a token's norm holds its meaning",
        "Rotating a token's vector has no effect on its norm, and the norm is what holds "
        "the token's meaning.",
        WRONG,
        "Rotation does keep the norm, but a norm is one number: keys of one length score "
        "anywhere between $-\\lVert q \\rVert \\lVert k \\rVert$ and "
        "$+\\lVert q \\rVert \\lVert k \\rVert$ against one query, so words are told apart "
        "by direction, and direction is what RoPE turns. What keeping the norm buys is a "
        "score whose size position cannot change.",
        8,
        "change-the-angle-keep-the-length",
        cc._check_norm_carries_meaning,
    ),
    Claim(
        "key-rotation-typo",
        _BLOG,
        "the key is rotated by R(m)",
        "The post writes the rotated key as $R(n)k = R(m)(W_k x_n)$.",
        WRONG,
        "A typo: its next line uses $R(n)$, as it must. Rotated by $R(m)$ like the query, the "
        "key would make every score independent of position.",
        9,
        "the-score-sees-only-the-offset",
        cc._check_key_rotation_typo,
    ),
    Claim(
        "relative-identity",
        "su2024roformer",
        "<R_m q, R_n k> = <q, R_(n-m) k>",
        "With RoPE, $\\langle R_m q, R_n k \\rangle = \\langle q, R_{n-m} k \\rangle$: the "
        "score depends on the offset only.",
        HOLDS,
        "Checked on all $41 \\times 41$ pairs of positions from $-20$ to $20$.",
        9,
        "the-score-sees-only-the-offset",
        cc._check_relative_identity,
    ),
    Claim(
        "matrix-vs-elementwise",
        _HF,
        "the elementwise formula computes the matrix form",
        "RoPE's block matrix with blocks $\\begin{bmatrix} \\cos & \\sin \\\\ -\\sin & "
        "\\cos \\end{bmatrix}$ is computed more cheaply by the elementwise formula.",
        WRONG,
        "The matrix turns clockwise, the formula counter-clockwise: they agree only at "
        "position 0. Both give relative scores, mirrored.",
        9,
        "which-way-does-it-turn",
        cc._check_matrix_vs_elementwise,
    ),
    Claim(
        "dog-cat",
        _BLOG,
        "RoPE: the same Dog-Cat score in both sentences",
        "With RoPE, *Dog* and *Cat* score the same in *Dog attacks the Cat* and *Once upon "
        "a time, a Dog attacks the Cat*.",
        CAVEAT,
        "True for the same two vectors at the same offset, but Llama 3.2's tokenizer "
        "makes *Dog* at the start of a text a different token; with a leading space the "
        "scores agree.",
        9,
        "same-words-same-distance-same-score",
        cc._check_dog_cat,
    ),
    Claim(
        "dogs-differ",
        _HF,
        "with RoPE the two dogs differ",
        "With RoPE inside attention the two *dog* tokens get different outputs.",
        HOLDS,
        "They differ by more than a thousand float32 steps, while moving the whole "
        "sentence changes nothing.",
        9,
        "the-dogs-again",
        cc._check_dogs_differ,
    ),
    Claim(
        "concept-note-code",
        _NOTE,
        "its code implements the RoPE of its text",
        "RoPE rotates the pairs $(x_{2i}, x_{2i+1})$, and the note's code implements it.",
        CAVEAT,
        "The code is a valid RoPE, but it pairs $x_i$ with $x_{i + D/2}$ (the half "
        "layout of GPT-NeoX and Hugging Face): equal to the text's only up to a fixed "
        "permutation of the features.",
        10,
        "a-source-that-says-pairs-and-codes-halves",
        cc._check_concept_note_code,
    ),
    Claim(
        "axes-apart",
        _HF,
        "rotate pairs within one axis",
        "In $n$ dimensions, pair features within the same axis; mixing axes in one "
        "rotation intermixes the offsets.",
        HOLDS,
        "Axial RoPE's score depends on $(\\Delta x, \\Delta y)$ only on every pair of "
        "cells; a rotation that shares a feature between axes breaks it.",
        11,
        "a-wrong-pairing",
        cc._check_axes_apart,
    ),
    Claim(
        "mrope-text",
        "wang2024qwen2vl",
        "M-RoPE is 1-D RoPE on text",
        "For text, where time, height and width are equal, M-RoPE is 1-D RoPE.",
        HOLDS,
        "Equal to 1-D RoPE (half layout, built as its dense matrix) to float64 rounding.",
        11,
        "m-rope-and-rope-mixed",
        cc._check_mrope_text,
    ),
    Claim(
        "plane-periods",
        _BLOG,
        "pair 0 turns every 6 tokens, the last every tens of thousands",
        "Pair 0 turns once every $2\\pi \\approx 6$ tokens and the last pair every tens of "
        "thousands of tokens.",
        HOLDS,
        "For base 10,000: 47,117 tokens for $D = 64$, 54,410 for $D = 128$.",
        12,
        "a-period-for-every-pair",
        cc._check_rope_blog_periods,
    ),
    Claim(
        "cosine-score",
        _BLOG,
        "the score goes as cos(|m - n| theta_i)",
        "RoPE's attention score is proportional to $\\cos(|m - n|\\, \\theta_i)$.",
        CAVEAT,
        "Each pair adds $|q_i|\\,|k_i| \\cos(m\\theta_i + \\varphi_i)$ with a phase set by "
        "$q$ and $k$; the claim is the special case $\\varphi_i = 0$.",
        12,
        "short-range-and-long-range",
        cc._check_cosine_form,
    ),
    Claim(
        "long-term-decay",
        "su2024roformer",
        "RoPE scores decay with distance",
        "RoPE gives long-term decay: the score shrinks as the distance grows.",
        CAVEAT,
        "True of the upper bound and of aligned queries and keys on average; for "
        "independent random $q, k$ the scores do not decay at all.",
        12,
        "does-attention-decay-with-distance",
        cc._check_decay,
    ),
    Claim(
        "no-forced-decay",
        "barbero2025round",
        "RoPE need not decay",
        "RoPE does not force attention to decay with distance.",
        HOLDS,
        "A key $k = R_{500} q$ scores highest at distance 500.",
        12,
        "does-attention-decay-with-distance",
        cc._check_no_forced_decay,
    ),
    Claim(
        "unique-positions",
        _HF,
        "2 pi x 10000 unique positions, ~63,000",
        "Base 10,000 gives $2\\pi \\cdot 10000$ unique positions, an upper bound on the "
        "context length of about 63,000.",
        WRONG,
        "No pair has that period (the slowest has $2\\pi \\cdot 10000^{(D-2)/D}$), and "
        "in exact arithmetic RoPE's positions never repeat: positions 62,832 apart are far "
        "apart.",
        12,
        "how-many-positions-can-rope-tell-apart",
        cc._check_unique_positions,
    ),
    Claim(
        "position-interpolation",
        "chen2023extending",
        "interpolation stays in trained angles",
        "Dividing every frequency by the extension factor keeps the longer context within "
        "the angles seen in training.",
        HOLDS,
        "No pair reaches an unseen angle, at the price of slowing the fast pairs too.",
        12,
        "past-the-training-length",
        cc._check_position_interpolation,
    ),
    Claim(
        "ntk-factor",
        "peng2024yarn",
        "NTK-aware scaling needs a larger factor",
        "NTK-aware scaling has to be run with a factor larger than the extension it is asked for.",
        HOLDS,
        "With factor $s$ its pairs just faster than the slowest still overshoot their "
        "trained arc at $s$ times the context.",
        12,
        "stretching-the-frequencies",
        cc._check_ntk_factor,
    ),
    Claim(
        "shift-in-a-model",
        _PAGE,
        "a shifted text gets the same output",
        "Because the score depends only on $R_{n-m}$, RoPE makes attention "
        "translation-invariant; checked again in a trained model, whose angles are rounded.",
        CAVEAT,
        "In SmolLM2-135M, shifting every position by up to 1,000,000 leaves the logits as they "
        "are with float64 angles; with float32 angles, as transformers computes them, they "
        "move by under 1% of the largest and the predicted tokens stay; with bfloat16 "
        "angles a shift of 10,000 changes over a quarter of the predictions.",
        15,
        "only-offsets-matter",
        cc._check_shift_in_a_model,
    ),
    Claim(
        "p-rope-in-a-model",
        "barbero2025round",
        "the slowest pairs need no rotation",
        "The slowest frequencies carry content more than position: removing their rotation "
        "(p-RoPE) costs little, while the fastest pairs carry the positional work.",
        WRONG,
        "In SmolLM2-135M, trained with every pair turning, the fastest pairs do carry the "
        "positional work: without their rotation the perplexity of a short text rises more "
        "than threefold, and the heads that read the previous token lose most of their "
        "attention to it. The slowest quarter holds more of the query and key norm, and over "
        "96 tokens its rotation (at most 0.017 rad) can go. Over a long text it cannot: "
        "without it the perplexity on Python's reference rises 3% over the first 2,048 "
        "tokens and 46% over the first 8,192 (the trained length), up to twice in blocks of "
        "512 tokens, the cost growing with distance. Barbero et al. train with p-RoPE from "
        "the start, which this does not test.",
        15,
        "p-rope-on-the-long-text",
        cc._check_p_rope_in_a_model,
    ),
    Claim(
        "generalisation-in-a-model",
        _PAGE,
        "RoPE generalises to longer sequences",
        "RoPE generalises excellently to longer sequences (it supports context scaling); "
        "checked again in a trained model.",
        WRONG,
        "Not without scaling. SmolLM2-135M reads 16,384 tokens of Python's reference (twice "
        "its trained length) in one pass: past position 8,192 plain RoPE's perplexity is 7.5 "
        "times that of plain RoPE in windows of 8,192 on the same tokens (blocks of 512: from "
        "x0.99 just past the trained length to x130 at the end). Context scaling at factor 2, "
        "without training, holds the model within 3% (YaRN), 5% (NTK-aware) and 7% (llama3) "
        "of the windows there, and costs as much inside the trained length; position "
        "interpolation costs 2.7 times everywhere. No recipe beats the windows: the model "
        "holds up past its length, it does not yet gain from the longer context.",
        15,
        "a-long-text",
        cc._check_generalisation_in_a_model,
    ),
    Claim(
        "absolute-poor-beyond",
        _PAGE,
        "absolute encodings are poor beyond the training length",
        "Absolute position embeddings, learned or sinusoidal, do not generalise well to "
        "sequences longer than those seen in training.",
        HOLDS,
        "Trained from scratch, the learned table and the sinusoidal encoding answer 0.95 to "
        "1.00 of the questions at the training length and lose most of it at twice the "
        "length: 0.27-0.30 and 0.19-0.21 of the copies, 0.47-0.48 of the recalls for the "
        "learned table, over three seeds.",
        16,
        "what-holds-across-seeds",
        cc._check_absolute_beyond,
    ),
    Claim(
        "relative-better",
        _PAGE,
        "relative encodings generalise better",
        "Relative encodings (T5, ALiBi, RoPE) generalise better to unseen sequence lengths.",
        CAVEAT,
        "At twice the training length every relative method beats both absolute encodings "
        "in every seed. At four times RoPE copies no better than the learned table "
        "(0.08-0.12 against 0.15-0.18) while ALiBi still copies 0.96-0.97: better is not "
        "true of every relative method at every length.",
        16,
        "what-holds-across-seeds",
        cc._check_relative_better,
    ),
    Claim(
        "excellent-generalisation",
        _PAGE,
        "RoPE generalises excellently to longer sequences",
        "RoPE generalises excellently to longer sequences (it supports context scaling).",
        WRONG,
        "Trained from scratch, RoPE answers everything at the training length, but at four "
        "times it answers 0.08-0.12 of the copies (guessing gets 0.06) and 0.36-0.52 of the "
        "recalls, below ALiBi (0.93 or more) in every seed and, on copying, below T5's "
        "bias. Past the training length its slow pairs meet angles the model never saw "
        "(chapter 12). Context scaling (chapters 12 and 15) repairs a trained model; it is "
        "not the encoding generalising.",
        16,
        "what-holds-across-seeds",
        cc._check_rope_generalises,
    ),
    Claim(
        "sinusoidal-extrapolates",
        _NOTE,
        "sinusoids extrapolate where learned tables do not",
        "Learned position embeddings usually lack the broad extrapolation that the classic "
        "sinusoidal encoding provides.",
        WRONG,
        "Both fail past the training length, and the sinusoidal encoding no less: at twice "
        "the length it copies 0.19-0.21 against the learned table's 0.27-0.30, over three "
        "seeds.",
        16,
        "what-holds-across-seeds",
        cc._check_sinusoidal_extrapolates,
    ),
    Claim(
        "rope-boost",
        _HF,
        "rotating instead of adding gives a big boost",
        "Rotating queries and keys instead of adding positions to the tokens gives a big "
        "performance boost.",
        CAVEAT,
        "At the training length RoPE answers everything, but so do the learned table, ALiBi "
        "and T5's bias (0.95 or more on both tasks): the gain is in speed. RoPE learns "
        "copying fastest (loss 0.015-0.019 after 500 steps, every other family 0.040 or "
        "more); on recall the learned table and T5 learn as fast.",
        16,
        "how-fast-they-learn",
        cc._check_rope_boost,
    ),
    Claim(
        "rotated-query",
        _BLOG,
        "<R(m) q, R(n) k> = <R(n-m) q, k>",
        "$\\langle R(m) q, R(n) k \\rangle = \\langle R(n-m) q, k \\rangle$.",
        WRONG,
        "Moving the rotation to the query reverses it: "
        "$\\langle R(m) q, R(n) k \\rangle = \\langle R(m-n) q, k \\rangle = "
        "\\langle q, R(n-m) k \\rangle$.",
        17,
        "a-slip-no-chapter-met",
        cc._check_rotated_query_form,
    ),
)
"""Every claim the book checks, in the order of the chapters."""


def _check_claims(claims: object) -> list[Claim]:
    """Return ``claims`` as a list if it is a non-empty sequence of :class:`Claim` objects."""
    items = check_sequence("claims", claims, what="a sequence of Claim objects")
    for i, claim in enumerate(items):
        if not isinstance(claim, Claim):
            raise TypeError(f"claims[{i}] must be a Claim, {_got(claim)}")
    return items


def check_claim(claim: Claim) -> Finding:
    """Check one claim again.

    Args:
        claim: a :class:`Claim`.

    Returns:
        The :class:`Finding` of its ``check``.

    Raises:
        TypeError: if ``claim`` is not a :class:`Claim` or its check returns something
            else than a :class:`Finding`.
        ValueError: if the check returns a verdict outside :data:`VERDICTS`.

    Example:
        >>> claim = next(c for c in CLAIMS if c.key == "msb-cycle")
        >>> check_claim(claim)
        Finding(verdict='holds with a caveat', evidence='8 bits: the MSB flips every 128 positions, repeats every 256')
    """
    if not isinstance(claim, Claim):
        raise TypeError(f"claim must be a Claim, got {type(claim).__name__}")
    finding = claim.check()
    if not isinstance(finding, Finding):
        raise TypeError(f"the check of {claim.key!r} returned {type(finding).__name__}")
    if finding.verdict not in VERDICTS:
        raise ValueError(f"the check of {claim.key!r} returned verdict {finding.verdict!r}")
    return finding


def check_claims(claims: Sequence[Claim] = CLAIMS) -> dict[str, Finding]:
    """Check every claim again.

    Args:
        claims: the claims (default: all of :data:`CLAIMS`).

    Returns:
        ``{claim key: Finding}`` in the order of ``claims``.

    Raises:
        TypeError: if ``claims`` is not a sequence of :class:`Claim` objects, or as
            :func:`check_claim`.
        ValueError: if ``claims`` is empty, for two claims with one key, or as
            :func:`check_claim`.

    Example:
        >>> findings = check_claims([c for c in CLAIMS if c.chapter == 3])
        >>> [f.verdict for f in findings.values()]
        ['holds', 'holds', 'holds', 'holds with a caveat']
    """
    claims = _check_claims(claims)
    keys = [c.key for c in claims]
    if len(set(keys)) != len(keys):
        raise ValueError(f"claim keys must be unique, got {keys}")
    return {claim.key: check_claim(claim) for claim in claims}


@dataclass(frozen=True)
class ClaimReport:
    """A claim checked again, as its chapter shows it: plain text, and HTML that wraps.

    Attributes:
        source: the source's short name.
        title: the claim in a few plain words.
        verdict: the verdict the check found.
        evidence: the measured facts behind it.
    """

    source: str
    title: str
    verdict: str
    evidence: str

    def __str__(self) -> str:
        return f"Claim ({self.source}): {self.title}\nVerdict: {self.verdict} — {self.evidence}"

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        e = html.escape
        return (
            '<div class="claim-report" style="border-left: 3px solid #0072b2; '
            'padding: 0.1em 0 0.1em 0.9em; margin: 0.5em 0">'
            f"<p><strong>Claim</strong> ({e(self.source)}): {e(self.title)}</p>"
            f"<p><strong>Verdict: {e(self.verdict)}</strong> — {e(self.evidence)}</p></div>"
        )


def report(key: str) -> ClaimReport:
    """Check the claim ``key`` again and say what it found, as its chapter shows it.

    Args:
        key: the claim's key (see :data:`CLAIMS`).

    Returns:
        A :class:`ClaimReport`: two lines of text (the source and the claim, then the
        verdict and the measured evidence), shown as wrapping HTML in a notebook.

    Raises:
        TypeError: if ``key`` is not a str.
        ValueError: for an unknown key, or when the check's verdict is no longer the one
            the book states for the claim (the text and the code have drifted apart).

    Example:
        >>> report("binary-252")
        Claim (Hugging Face post): 252 is 11111100 in binary
        Verdict: holds — 252 = 11111100 (MSB first); features 0..7 = 00111111
    """
    keys = {claim.key: claim for claim in CLAIMS}
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, {_got(key)}")
    if key not in keys:
        raise ValueError(f"key must be the key of a claim, got key={key!r}; known: {sorted(keys)}")
    claim = keys[key]
    finding = check_claim(claim)
    if finding.verdict != claim.verdict:
        raise ValueError(
            f"the check of {key!r} finds {finding.verdict!r}, the book says {claim.verdict!r}"
        )
    source = SOURCES.get(claim.source, claim.source)
    return ClaimReport(source, claim.title, finding.verdict, finding.evidence)
