"""Plan the generated scan step of each parser state: its shape and its tie order.

One scan step (docs/design.md, "One scan step") asks every watched delimiter for its next
match and commits the best complete one: the earliest, then the longest, then the first in
the state's watch order (opens before closes, then by field name), if it starts before
every match that is still pending. The runtime supplies the searches (runtime.automaton:
`State.next_literal`, `State.literal_at`, `RegexDelimiter.next_hit`, `State.literal_piece`);
this module decides the code that chooses between their answers, so that each state's
step reads as that state's rule, with the tie order written into it:

- "none": nothing is watched (a field without a close);
- "literal": one literal, found with one search;
- "pattern": one regex;
- "general": the state's literals, found with one search and told apart with an
  if/elif in watch order, then each regex in watch order, each compared with the best so
  far by a condition that already knows which delimiters rank before it.

compiler/templates/parts.j2 (`scan_step`) lays the code out from a ScanStep.
"""

from __future__ import annotations

from dataclasses import dataclass

from .automaton import StatePlan, Watch
from .quoting import identifier

# When a regex's match replaces the best match so far. The earliest start wins, then the
# longest match; an equal one only when the regex ranks before the best's delimiter.
EARLIER = "best is None or start < best[0]"
LONGER = f"{EARLIER} or (start == best[0] and end > best[1])"
NOT_SHORTER = f"{EARLIER} or (start == best[0] and end >= best[1])"
# The limit past which a regex match cannot change the step (runtime next_hit's `limit`).
LIMIT = "hold if best is None or hold < best[0] else best[0]"


@dataclass(frozen=True)
class LiteralBranch:
    """One literal delimiter of a "general" step: the branch taken when its literal is the
    longest one at the leftmost literal hit."""

    local: str  # the delimiter, as a local name of the step
    constant: str  # its module constant: a str, or a tuple of literals
    listed: bool  # the constant is a tuple (`text in CONSTANT`)
    path: str  # template key, for a comment
    # "if", "elif" or "else" (after the hold of a growing literal), "" when it is the only
    # branch and needs no test
    keyword: str


@dataclass(frozen=True)
class PatternCheck:
    """One regex delimiter of a "general" step."""

    local: str
    path: str
    better: str | None  # condition for it to replace the best match; None: nothing yet
    first: bool  # nothing is held back yet: a pending match holds from its start

    limit = LIMIT  # where its match stops mattering (runtime next_hit's `limit`)


@dataclass(frozen=True)
class ScanStep:
    function: str  # the generated static method
    shape: str  # "none", "literal", "pattern" or "general"
    locals: tuple[str, ...]  # the watched delimiters, in watch order
    paths: tuple[str, ...]  # their template keys, in watch order
    constant: str  # "literal" (and a "general" step with one literal): its constant
    literals: tuple[LiteralBranch, ...]  # "general": the literal branches, in watch order
    # "general": whether the step needs the literal's text (several literals watched), and
    # whether one may still grow at the end of the buffer (a list where one is a prefix of
    # another: `State.extending`).
    needs_text: bool
    extends: bool
    patterns: tuple[PatternCheck, ...]

    @property
    def unpack(self) -> str:
        """The target that unpacks `state.watched` into the locals."""
        names = [identifier(name) for name in self.locals]
        return names[0] + "," if len(names) == 1 else ", ".join(names)


def plan_scan_step(
    plan: StatePlan, function: str, slugs: dict[str, str], constants: dict[str, str]
) -> ScanStep:
    """The scan step of `plan`. `slugs` gives each field's identifier part; `constants`
    each literal delimiter's module constant, by template key."""
    watches = plan.watches
    names = tuple(f"{slugs[watch.field.name].lower()}_{watch.kind}" for watch in watches)
    paths = tuple(watch.delimiter.path for watch in watches)
    literal = [(rank, watch) for rank, watch in enumerate(watches) if watch.delimiter.is_literal]
    pattern = [
        (rank, watch) for rank, watch in enumerate(watches) if not watch.delimiter.is_literal
    ]
    texts = sum(len(_texts(watch)) for _, watch in literal)
    if not watches:
        shape = "none"
    elif len(watches) == 1 and texts == 1:
        shape = "literal"
    elif len(watches) == 1 and pattern:
        shape = "pattern"
    else:
        shape = "general"
    extends = any(watch.delimiter.can_extend for _, watch in literal)
    branches = tuple(
        LiteralBranch(
            local=names[rank],
            constant=constants[watch.delimiter.path],
            listed=len(_texts(watch)) > 1,
            path=watch.delimiter.path,
            keyword=(
                ("else" if extends else "")
                if len(literal) == 1
                else ("if" if index == 0 and not extends else "elif")
            ),
        )
        for index, (rank, watch) in enumerate(literal)
    )
    checks = []
    before = [rank for rank, _ in literal]
    for rank, watch in pattern:
        first = not before
        if first:
            better = None
        elif all(other < rank for other in before):
            better = LONGER
        elif all(other > rank for other in before):
            better = NOT_SHORTER
        else:  # ranks on both sides: ask the best's delimiter
            better = (
                f"{EARLIER} or (start == best[0] and "
                f"(end > best[1] or end == best[1] and best[2].rank > {rank}))"
            )
        checks.append(
            PatternCheck(
                local=names[rank],
                path=watch.delimiter.path,
                better=better,
                first=first,
            )
        )
        before.append(rank)
    return ScanStep(
        function=function,
        shape=shape,
        locals=names,
        paths=paths,
        constant=branches[0].constant if texts == 1 else "",
        literals=branches,
        needs_text=texts > 1,
        extends=extends,
        patterns=tuple(checks),
    )


def _texts(watch: Watch) -> tuple[str, ...]:
    assert watch.delimiter.literals is not None
    return watch.delimiter.literals
