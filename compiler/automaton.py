"""Work out, at build time, what each parser state watches and what it may skip.

States: one per explicit field (its region is open), plus the start state, which is the
implicit field when the template has one and the null sink otherwise. In an explicit
field's state only its close is watched; in the start state every explicit open is, plus
the implicit field's own close.

For each state this computes the watched delimiters in the reference's tie-break order
(opens before closes, then by field name), and the set of characters that can start any
of them. A chunk with none of those characters, arriving when nothing is held back,
cannot change the state, so the generated fast path routes it without scanning. A state
watching a regex that can start anywhere has no such set and always scans.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import Delimiter, Field, Template
from .regex_profile import RegexProfile, profile

# The run a pattern must be led by for the fast path to test it with str.isspace: every
# character `regex` matches with \s is whitespace to str.isspace (tests/test_automaton.py).
LED_BY_SPACE = r"\s*"


@dataclass(frozen=True)
class Watch:
    """One delimiter watched in one state."""

    kind: str  # "open" or "close"
    field: Field
    delimiter: Delimiter
    profile: RegexProfile | None  # None for literal delimiters

    @property
    def starts(self) -> tuple[str, ...] | None:
        """The literal texts every match starts with one of (after its run, for a pattern
        led by a run: RegexProfile.led_by); None if unknown."""
        if self.delimiter.literals is not None:
            return self.delimiter.literals
        assert self.profile is not None
        if self.profile.led_by and not self.led_by_space:
            # The fast path's exact test (State.may_start) sees texts, not a run at the end
            # of a chunk, which a pattern led by another run (`[ \t]*<p>`) may begin with:
            # its stop characters (the run's among them) send such chunks to the scan.
            return None
        return self.profile.literal_prefixes or self.profile.led_prefixes or None

    @property
    def first_chars(self) -> frozenset[str] | None:
        """Characters a match can start with, for the fast path's test; for a pattern led by
        a run of whitespace, those its texts start with (the fast path also sends a chunk
        that ends in whitespace to the scan, `StatePlan.run_of_space`)."""
        if self.delimiter.literals is not None:
            return frozenset(literal[0] for literal in self.delimiter.literals)
        assert self.profile is not None
        if self.led_by_space:
            return frozenset(text[0] for text in self.profile.led_prefixes)
        return self.profile.first_chars

    @property
    def led_by_space(self) -> bool:
        r"""Whether every match is a run of `\s` and then one of `starts`."""
        return self.profile is not None and self.profile.led_by == LED_BY_SPACE


@dataclass(frozen=True)
class StatePlan:
    field: Field | None  # None: the null sink
    implicit: bool
    watches: tuple[Watch, ...]

    @property
    def stop_chars(self) -> tuple[str, ...] | None:
        """Characters that send a chunk to the scan loop, sorted; None: always scan."""
        chars: set[str] = set()
        for watch in self.watches:
            first = watch.first_chars
            if first is None:
                return None
            chars |= first
        return tuple(sorted(chars))

    @property
    def start_texts(self) -> tuple[str, ...] | None:
        """Every text a watched delimiter's match starts with, if all are known and one is
        longer than a character (otherwise the stop characters already say everything)."""
        texts: set[str] = set()
        for watch in self.watches:
            starts = watch.starts
            if starts is None:
                return None
            texts.update(starts)
        return tuple(sorted(texts)) if any(len(text) > 1 for text in texts) else None

    @property
    def plain_pieces(self) -> bool:
        """Whether a piece of a start text at the end of a chunk is always exactly what the
        scan would hold back: no start text occurs inside another's proper prefix (which
        could be a complete match after the piece), and no regex has an assertion in front
        of its prefix (which could refuse the piece).

        A pattern whose run has a look-behind in front of it (`RegexProfile.led_guarded`)
        counts when a pattern of the state has a branch whose run has none: that branch holds
        any run at the end (partial, awaiting its text) from the run's start, and a guarded
        branch cannot start earlier (a match starts at a run, or at a start text, and no
        piece of one is at the end). A piece that only guarded branches' texts begin with
        (`guarded_prefixes`) may be refused: the runtime leaves those to the scan
        (State.guarded_piece).
        """
        bare = any(
            watch.profile.led_bare
            for watch in self.watches
            if watch.profile is not None and watch.led_by_space
        )
        return self._pieces_apart and all(
            watch.profile is None
            or watch.profile.prefix_at_start
            or watch.profile.prefix_guarded
            or (watch.profile.led_by and (bare or not watch.profile.led_guarded))
            for watch in self.watches
        )

    @property
    def _pieces_apart(self) -> bool:
        """Whether no start text occurs inside another's proper prefix."""
        texts = self.start_texts or ()
        return not any(other in text[1:-1] for text in texts for other in texts)

    @property
    def run_of_space(self) -> bool:
        r"""Whether a chunk that ends in whitespace must go to the scan: it may begin a match
        of a pattern led by a run of `\s` (held back, as the reference holds it)."""
        return any(watch.led_by_space for watch in self.watches)

    @property
    def holds_space_runs(self) -> bool:
        r"""Whether the fast path can hold a run of whitespace itself (`Scanner._feed_run`):
        every pattern led by a run is led by `\s*`, and no start text begins with whitespace,
        so held-back text that is all whitespace is such a run, and what a scan holds back of
        a chunk with no start text in it is the run at its end."""
        stop = self.stop_chars
        return (
            self.run_of_space
            and self.plain_pieces
            and stop is not None
            and not any(char.isspace() for char in stop)
            and all(
                watch.led_by_space
                for watch in self.watches
                if watch.profile is not None and watch.profile.led_by
            )
        )


@dataclass(frozen=True)
class Automaton:
    states: tuple[StatePlan, ...]  # explicit fields in template order, then the start state
    start: StatePlan
    # Left context to keep for look-behind; None when a pattern's reach cannot be bounded.
    context: int | None


def build_automaton(template: Template) -> Automaton:
    profiles: dict[str, RegexProfile] = {}

    def watch(kind: str, field: Field, delimiter: Delimiter) -> Watch:
        regex_profile = None
        if delimiter.pattern is not None:
            regex_profile = profiles.setdefault(delimiter.pattern, profile(delimiter.pattern))
        return Watch(kind=kind, field=field, delimiter=delimiter, profile=regex_profile)

    explicit = [field for field in template.fields if not field.implicit]
    states = [
        StatePlan(
            field=field,
            implicit=False,
            watches=(watch("close", field, field.close),) if field.close is not None else (),
        )
        for field in explicit
    ]
    start_watches = [
        watch("open", field, field.open) for field in explicit if field.open is not None
    ]
    implicit = template.implicit
    if implicit is not None and implicit.close is not None:
        start_watches.append(watch("close", implicit, implicit.close))
    start_watches.sort(key=lambda item: (item.kind != "open", item.field.name))
    start = StatePlan(field=implicit, implicit=implicit is not None, watches=tuple(start_watches))
    states.append(start)

    reaches = [item.lookbehind for item in profiles.values()]
    context = (
        None if None in reaches else max([0, *(reach for reach in reaches if reach is not None)])
    )
    return Automaton(states=tuple(states), start=start, context=context)
