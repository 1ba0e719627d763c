"""A marked block in a TOML file: specactor's part of a Codex `config.toml`.

No style-keeping TOML library is a dependency, so specactor owns the lines between
`# specactor: begin` and `# specactor: end` and never parses or rewrites the rest. The block is
appended at the end of the file (it starts with a table header, so it cannot fall into the user's
last table), replaced in place when it changes, and removed with the blank line before it. The
result must parse (`tomllib`): a user's own `[mcp_servers.specactor]` or a static `hooks` array
that the block would redefine is an error, not a silent clobber.
"""

from __future__ import annotations

import re
import tomllib

BEGIN = "# specactor: begin"
END = "# specactor: end"
_BLOCK = re.compile(rf"(?:\r?\n)?^{re.escape(BEGIN)}[^\n]*\n.*?^{re.escape(END)}[^\n]*(?:\n|\Z)", re.M | re.S)


class TomlBlockError(ValueError):
    """The file does not parse with the block in it, or holds two blocks."""


def _find(text: str) -> list[re.Match[str]]:
    return list(_BLOCK.finditer(text))


def put(text: str, body: str, header: str) -> str:
    """`text` with specactor's block holding `body` (TOML lines ending in a newline); `header` is the
    comment after the begin marker."""
    block = f"{BEGIN} {header}\n{body}{END}\n"
    found = _find(text)
    if len(found) > 1:
        raise TomlBlockError("the file holds more than one specactor block; remove all but one")
    if found:
        match = found[0]
        lead = "\n" if match.group().startswith("\n") else ""
        lead = "\r\n" if match.group().startswith("\r\n") else lead
        new = text[:match.start()] + lead + block + text[match.end():]
    else:
        new = text + ("" if not text.strip() else ("\n" if text.endswith("\n") else "\n\n")) + block
    _check(text_without(new), new)
    return new


def text_without(text: str) -> str:
    """`text` with specactor's block (and the blank line before it) removed."""
    return _BLOCK.sub("", text)


def has_block(text: str) -> bool:
    return bool(_find(text))


def _check(rest: str, new: str) -> None:
    try:
        user = tomllib.loads(rest)
    except tomllib.TOMLDecodeError as err:
        raise TomlBlockError(f"the file is not valid TOML ({err}); fix it first") from None
    if "specactor" in user.get("mcp_servers", {}):
        raise TomlBlockError("[mcp_servers.specactor] is already defined outside specactor's block; "
                             "remove it (install writes its own) or keep yours and skip install")
    try:
        tomllib.loads(new)
    except tomllib.TOMLDecodeError as err:
        raise TomlBlockError(f"specactor's block clashes with the file's own tables ({err}); "
                             "a `hooks` table written as inline arrays cannot take more entries") from None
