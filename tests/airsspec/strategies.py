"""Hypothesis strategies for AirsSpec documents, in the normal form the domain stores."""

from __future__ import annotations

import datetime as dt
from typing import get_args

from hypothesis import strategies as st

from specactor.domain.airsspec import vocab
from specactor.domain.airsspec.model import (
    BuildProgress,
    Dependency,
    PlanDoc,
    PlanStep,
    ProjectConfig,
    SpecDoc,
    SpecMeta,
    Transition,
    WorkflowState,
)
from specactor.domain.airsspec.text import block, note, one_line, timestamp

SPEC_ID = "1737734400-user-authentication"

timestamps = st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(9999, 12, 30),
                          timezones=st.just(dt.UTC)).map(timestamp)
ids = st.from_regex(r"\A[0-9]{1,18}-[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?\Z")
titles = st.text(min_size=1).map(one_line).filter(bool)


def lit(tp: object) -> st.SearchStrategy[str]:
    return st.sampled_from(get_args(tp))


specs = st.builds(
    SpecDoc,
    meta=st.builds(SpecMeta, title=titles, description=st.text(), category=lit(vocab.Category),
                   state=lit(vocab.Lifecycle),
                   dependencies=st.lists(st.builds(Dependency, spec_id=ids, kind=lit(vocab.DependencyKind)),
                                         max_size=3).map(tuple),
                   created_at=timestamps, updated_at=timestamps),
    content=st.text(),
)

steps = st.builds(PlanStep, title=titles, description=st.text().map(block),
                  complexity=st.none() | lit(vocab.Complexity), status=lit(vocab.StepStatus),
                  notes=st.none() | st.text().map(note).filter(bool))

plans = st.builds(PlanDoc, spec_id=st.just(SPEC_ID), approach=st.text(), steps=st.lists(steps, max_size=4).map(tuple),
                  created_at=timestamps, updated_at=timestamps)

maybe_text = st.none() | st.text()
percentages = st.integers(0, 100) | st.floats(0, 100, allow_nan=False).filter(lambda f: not f.is_integer())

states = st.builds(
    WorkflowState, spec_id=st.just(SPEC_ID), lifecycle=lit(vocab.Lifecycle), phase=lit(vocab.Phase),
    updated_at=timestamps, plan_approved=st.booleans(),
    build_progress=st.builds(BuildProgress, total_steps=st.integers(0, 50), completed_steps=st.integers(0, 50),
                             percentage=percentages, current_step=maybe_text, notes=maybe_text),
    started_at=st.none() | timestamps, completed_at=st.none() | timestamps, summary=maybe_text,
    deviations=maybe_text,
    history=st.lists(st.builds(Transition, at=timestamps, from_state=lit(vocab.Lifecycle),
                               to_state=lit(vocab.Lifecycle), reason=maybe_text), max_size=3).map(tuple),
)

configs = st.builds(ProjectConfig, name=st.text(), description=st.text(), default_category=lit(vocab.Category))
