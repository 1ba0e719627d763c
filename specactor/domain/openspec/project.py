"""Project context: `project.md` (0.x) or the `context:` of `config.yaml` (1.x), read and rewritten.

`edit_markdown` replaces the document, appends to it, or rewrites one `## Section` (created at
the end when missing, removed when the new body is None). `set_config_context` rewrites only the
top-level `context:` value of config.yaml, keeping every other line (comments included), and
proves the result parses back to the intended value.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Literal

from specactor.domain.openspec.metadata import YamlError, load
from specactor.domain.openspec.text import fence_mask, normalize_newlines, rx, trim

Mode = Literal["replace", "append", "section"]


def section_title(section: str) -> str:
    return trim(section.lstrip("#"))


def edit_markdown(current: str, content: str | None, mode: Mode, section: str | None = None) -> str:
    """The document after the edit. In "section" mode a None `content` removes the section."""
    if mode == "replace":
        return content or ""
    if mode == "append":
        if not content:
            return current
        base = current.rstrip("\n")
        return f"{base}\n\n{content}" if base else content
    assert section is not None
    title = section_title(section)
    lines = normalize_newlines(current).split("\n")
    mask = fence_mask(lines)
    header = rx(r"^##\s+(.+?)\s*$")
    start = next((i for i, line in enumerate(lines) if not mask[i] and (m := header.match(line))
                  and trim(m.group(1)).lower() == title.lower()), -1)
    body = [] if content is None else [*trim(content).split("\n"), ""]
    if start == -1:
        if content is None:
            return current
        base = current.rstrip("\n")
        block = "\n".join([f"## {title}", "", *body]).rstrip("\n") + "\n"
        return f"{base}\n\n{block}" if base else block
    boundary = rx(r"^#{1,2}\s")
    end = next((i for i in range(start + 1, len(lines)) if not mask[i] and boundary.match(lines[i])), len(lines))
    replacement = [] if content is None else [lines[start], "", *body]
    rest = lines[end:]
    out = lines[:start] + replacement + rest
    return "\n".join(out).rstrip("\n") + "\n" if rest or replacement else "\n".join(out)


@lru_cache(maxsize=16)
def _facts(config: str) -> tuple[str | None, bool, str | None]:
    """(the YAML error, whether it is a mapping, its string `context:`) of one config text.

    Remembered by content: an edit parses the text it reads (written by the edit before, which
    already parsed it to prove it) and the text it writes once, not three times over.
    """
    try:
        data = load(config)
    except YamlError as err:
        return str(err), False, None
    value = data.get("context") if isinstance(data, dict) else None
    return None, isinstance(data, dict), value if isinstance(value, str) else None


def config_context(config: str | None) -> str | None:
    if config is None:
        return None
    return _facts(config)[2]


def _context_block(value: str) -> list[str]:
    """`context: |` with the chomping indicator that reproduces `value`'s trailing newlines."""
    if value == "":
        return ['context: ""']
    if not value.endswith("\n"):
        chomp, lines = "-", value.split("\n")
    elif value.endswith("\n\n"):
        chomp, lines = "+", value.split("\n")[:-1]
    else:
        chomp, lines = "", value[:-1].split("\n")
    indent = "2" if lines[0].startswith((" ", "\t")) or lines[0] == "" else ""
    return [f"context: |{indent}{chomp}", *[f"  {line}" if line else "" for line in lines]]


def set_config_context(config: str, value: str) -> str:
    """config.yaml with its `context:` set to `value`, everything else untouched.

    Raises:
        ValueError: when config.yaml is not a YAML mapping (nothing is rewritten then).
    """
    if trim(config):
        error, mapping, _ = _facts(config)
        if error is not None:
            raise YamlError(error)
        if not mapping:
            raise ValueError("openspec/config.yaml is not a YAML mapping")
    lines = normalize_newlines(config).split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("context:")), -1)
    end = start + 1
    block = _context_block(value)
    if start == -1:
        anchor = next((i + 1 for i, line in enumerate(lines) if line.startswith("schema:")), len(lines))
        head = lines[:anchor] + ([""] if anchor and lines[anchor - 1] != "" else [])
        tail = lines[anchor:]
        out = head + block + ([""] if tail and tail[0] != "" else []) + tail
    else:
        while end < len(lines) and (lines[end] == "" or lines[end][:1] in (" ", "\t")):
            end += 1
        while end > start + 1 and lines[end - 1] == "":
            end -= 1
        out = lines[:start] + block + lines[end:]
    text = "\n".join(out)
    if not text.endswith("\n"):
        text += "\n"
    if config_context(text) != value:  # a value the block form cannot carry: fall back to a quoted scalar
        quoted = [f"context: {json.dumps(value, ensure_ascii=False)}"]
        out = lines[:start] + quoted + lines[end:] if start != -1 else [*lines, *quoted]
        text = "\n".join(out).rstrip("\n") + "\n"
    return text
