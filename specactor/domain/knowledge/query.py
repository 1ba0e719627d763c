"""Finding knowledge items: filters, a word match for `query`, and which items bind a caller.

A query word matches an item word that starts with it (`migrat` finds "migration"); an item's
score is the share of query words it contains, a title, id or tag hit counting three times, a
summary hit twice, a body hit once. Ties go to the more specific layer (project first), then id.
`QueryIndex` answers the same as `query`, from word lists built once per set of items: a query
word's hits are the sorted vocabulary's run of words starting with it, not a scan of every item.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence

from specactor.domain.knowledge.api import (
    LAYER_RANK,
    Item,
    ItemSummary,
    KnowledgeQueryIn,
)
from specactor.domain.memory.layers import Identifiers
from specactor.domain.memory.scoring import query_words

_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


def _hit(word: str, vocabulary: set[str]) -> bool:
    return word in vocabulary or any(v.startswith(word) for v in vocabulary)


def text_score(item: Item, words: Sequence[str]) -> float:
    """The weighted share of `words` found in the item, in [0, 1]."""
    strong = _words(" ".join([item.title, item.id, *item.tags]))
    summary = _words(item.summary)
    body = _words(item.content)
    total = 0.0
    for word in words:
        total += 3.0 if _hit(word, strong) else 2.0 if _hit(word, summary) else 1.0 if _hit(word, body) else 0.0
    return total / (3.0 * len(words)) if words else 1.0


def summarise(item: Item) -> ItemSummary:
    return ItemSummary(id=item.id, type=item.type, layer=item.layer, title=item.title, summary=item.summary,
                       status=item.status, tags=item.tags, has_constraints=bool(item.constraints))


def query(items: Iterable[Item], args: KnowledgeQueryIn) -> tuple[list[ItemSummary], int]:
    """The items that pass every filter, best first, cut to the limit; and how many passed."""
    words = query_words(args.query) if args.query and args.query.strip() else []
    statuses = set(args.status)
    wanted_tags = set(args.tags)
    scored: list[tuple[float, int, str, Item]] = []
    for item in items:
        if item.status not in statuses or (args.type and item.type != args.type) or (
                args.layer and item.layer != args.layer) or not wanted_tags <= set(item.tags):
            continue
        score = text_score(item, words)
        if score > 0.0:
            scored.append((-score, LAYER_RANK[item.layer], item.id, item))
    scored.sort(key=lambda s: s[:3])
    return [summarise(s[3]) for s in scored[:args.limit]], len(scored)


def binds(item: Item, ids: Identifiers) -> bool:
    """Whether an item's scope covers the caller: company items bind everyone, others their own org,
    team or project."""
    if item.layer == "company":
        return True
    mine = {"org": ids.org_id, "team": ids.team_id, "project": ids.project_id}[item.layer]
    return mine is not None and mine == item.scope


class _Tier:
    """One weight's words (title/id/tags, summary or body) of every item: word → item positions."""

    def __init__(self, texts: Iterable[str]) -> None:
        postings: dict[str, list[int]] = {}
        for position, text in enumerate(texts):
            for word in _words(text):
                postings.setdefault(word, []).append(position)
        self.words = sorted(postings)
        self.postings = {w: frozenset(p) for w, p in postings.items()}

    def hits(self, prefix: str) -> set[int]:
        """The positions of the items holding a word that starts with `prefix` (`_hit`)."""
        found: set[int] = set()
        i = bisect.bisect_left(self.words, prefix)
        while i < len(self.words) and self.words[i].startswith(prefix):
            found.update(self.postings[self.words[i]])
            i += 1
        return found


class QueryIndex:
    """`query` over a fixed list of items, with their words read once (build it per snapshot)."""

    def __init__(self, items: Iterable[Item]) -> None:
        self.items = list(items)
        self._strong = _Tier(" ".join([i.title, i.id, *i.tags]) for i in self.items)
        self._summary = _Tier(i.summary for i in self.items)
        self._body = _Tier(i.content for i in self.items)

    def query(self, args: KnowledgeQueryIn) -> tuple[list[ItemSummary], int]:
        """What `query(items, args)` answers, without reading every item's text."""
        words = query_words(args.query) if args.query and args.query.strip() else []
        tiers = [(self._strong.hits(w), self._summary.hits(w), self._body.hits(w)) for w in words]
        if words:
            candidates: Iterable[int] = sorted(set().union(*(hit for tier in tiers for hit in tier)))
        else:
            candidates = range(len(self.items))
        statuses = set(args.status)
        wanted_tags = set(args.tags)
        scored: list[tuple[float, int, str, Item]] = []
        for position in candidates:
            item = self.items[position]
            if item.status not in statuses or (args.type and item.type != args.type) or (
                    args.layer and item.layer != args.layer) or not wanted_tags <= set(item.tags):
                continue
            total = 0.0  # summed in `text_score`'s order, so the scores are the very same floats
            for strong, summary, body in tiers:
                total += (3.0 if position in strong else 2.0 if position in summary else 1.0 if position in body
                          else 0.0)
            score = total / (3.0 * len(words)) if words else 1.0
            if score > 0.0:
                scored.append((-score, LAYER_RANK[item.layer], item.id, item))
        scored.sort(key=lambda s: s[:3])
        return [summarise(s[3]) for s in scored[:args.limit]], len(scored)
