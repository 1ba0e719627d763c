"""Relevance scores in [0, 1]: BM25 normalised, cosine similarity, and their fusion.

**Lexical (the default).** SQLite FTS5 computes, for a memory d and a query of words q1..qn,

    BM25(d) = sum_i idf(qi) * tf(qi, d) * (k1 + 1) / (tf(qi, d) + k1 * (1 - b + b * |d| / avgdl))

with k1 = 1.2, b = 0.75 and idf(q) = ln((N - n(q) + 0.5) / (n(q) + 0.5)), floored at 1e-6 (N rows
in the index, n(q) of them containing q). We report

    score(d) = min(1, BM25(d) / S)      where S = sum_i idf(qi)

S is exactly the BM25 of an *ideal* memory: one of average length that contains every query word
once. So 1.0 means "as good a match as a typical memory holding all the words"; a memory missing
words that carry 30 % of the query's idf weight lands near 0.7 (the default threshold); words
repeated, or found in a shorter than average memory, push towards the cap. Words no memory
contains are left out of S (they cannot tell memories apart), and so are common English stopwords
unless the query has nothing else. Words in more than half of the memories get FTS5's floor idf
(1e-6): when the threshold is above 0 and the query has other words they are not matched at all,
which changes no score by more than 2.2e-6 per such word and spares scoring most of the store.

**Semantic.** Cosine similarity of the embeddings, clipped at 0. **Hybrid**: the mean of both.
"""

from __future__ import annotations

import math
import operator
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Final, Literal

Mode = Literal["lexical", "semantic", "hybrid"]

MAX_WORDS: Final = 32
FLOOR: Final = 1e-6  # FTS5's floor for a non-positive idf (a word in more than half the rows)

STOPWORDS: Final = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves
""".split())

_WORD = re.compile(r"[^\W_]+")


def query_words(text: str) -> list[str]:
    """The distinct words of a query, lower-cased, stopwords dropped (unless that leaves none).

    Only letters and digits survive, so nothing in a query can be read as FTS5 syntax: `"`,
    `*`, `(`, `NEAR` and `AND` are either dropped or quoted as plain words by `match_expression`.
    """
    words = [w.casefold() for w in _WORD.findall(unicodedata.normalize("NFKC", text))]
    seen: dict[str, None] = {}
    for word in words:
        seen.setdefault(word, None)
    distinct = list(seen)
    content = [w for w in distinct if w not in STOPWORDS]
    return (content or distinct)[:MAX_WORDS]


def phrase(word: str) -> str:
    """`word` as an FTS5 string literal (a double quote inside is doubled)."""
    return '"' + word.replace('"', '""') + '"'


def match_expression(words: Sequence[str]) -> str:
    """An FTS5 query matching any of `words`, each quoted so none is an operator."""
    return " OR ".join(phrase(w) for w in words)


def idf(rows: int, hits: int) -> float:
    """FTS5's inverse document frequency of a word in `hits` of `rows` rows."""
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else FLOOR


def ideal_score(rows: int, hits: Iterable[int]) -> float:
    """S: the BM25 of an average-length memory containing each word once. Absent words add nothing."""
    return sum(idf(rows, n) for n in hits if n > 0)


def words_to_match(words: Sequence[str], hits: Sequence[int], rows: int, threshold: float) -> list[str]:
    """The words worth matching: those some memory contains, less the floor-idf ones when that is exact
    enough (see the module docstring)."""
    live = [w for w, n in zip(words, hits, strict=True) if n > 0]
    telling = [w for w, n in zip(words, hits, strict=True) if n > 0 and idf(rows, n) > FLOOR]
    return telling if telling and threshold > 0.0 else live


def lexical_score(bm25: float, ideal: float) -> float:
    """BM25 (positive, higher is better) mapped into [0, 1] by the ideal score."""
    if ideal <= 0.0 or bm25 <= 0.0:
        return 0.0
    return min(1.0, bm25 / ideal)


def bm25_cut(threshold: float, ideal: float) -> float:
    """The smallest BM25 whose score reaches `threshold` (the search filters on it in SQL)."""
    return threshold * ideal


def lexical_needed(mode: Mode, threshold: float) -> float:
    """The least lexical score with which a memory can still reach `threshold` in `mode`: all of it in
    lexical mode; in hybrid mode the cosine adds at most 1, so (lexical + 1) / 2 >= threshold needs
    lexical >= 2 * threshold - 1 (nothing below 0.5); semantic mode does not look at it."""
    if mode == "lexical":
        return threshold
    if mode == "hybrid":
        return max(0.0, 2.0 * threshold - 1.0)
    return 0.0


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity clipped into [0, 1]; 0 for a zero or mismatched vector."""
    if len(a) != len(b) or not a:
        return 0.0
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    if norm == 0.0:
        return 0.0
    return min(1.0, max(0.0, dot / norm))


def unit(vector: Sequence[float]) -> list[float]:
    """`vector` scaled to length 1 (a zero vector stays zero), so cosines against it are dot products.
    `hypot` is within an ulp of sqrt(fsum(squares)) at a fifteenth of its cost (1.3 against 19 us
    for 256 numbers), and every path scores with this one unit query."""
    norm = math.hypot(*vector)
    return [x / norm for x in vector] if norm else [0.0] * len(vector)


def unit_cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """`cosine` of two unit-length vectors (what `unit` and the stored, packed vectors are), clipped into
    [0, 1]: one dot product, about a third of `cosine`'s cost; 0 for mismatched lengths."""
    if len(a) != len(b):
        return 0.0
    dot: float = sum(map(operator.mul, a, b))
    return min(1.0, max(0.0, dot))


def fuse(mode: Mode, lexical: float, semantic: float) -> float:
    """The score a mode reports from its two components."""
    if mode == "lexical":
        return lexical
    if mode == "semantic":
        return semantic
    return (lexical + semantic) / 2.0


def recall_at_k(ranked: Sequence[str], relevant: Iterable[str], k: int = 5) -> float:
    """The share of `relevant` ids found among the first `k` of `ranked` (1.0 when none are relevant)."""
    wanted = set(relevant)
    if not wanted:
        return 1.0
    return len(wanted.intersection(ranked[:k])) / len(wanted)
