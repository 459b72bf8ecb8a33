"""Classify a delimiter regex: how far it looks left, and which characters can start it.

Two facts let the generated parser avoid work without changing any result:

- `lookbehind`: how many characters before the search position the pattern may inspect
  (`^`, `\\b`, look-behind). The parser keeps that much already-routed text as left
  context and drops the rest, so a feed costs O(chunk). None means "cannot bound it":
  nothing is ever dropped.
- `first_chars`: every match starts with one of these characters, or (a zero-width
  look-ahead match) sits right before one. A chunk that contains none of them cannot
  start a match, so the parser can route it without searching. None means the pattern
  can start anywhere (or match empty anywhere) and must always be searched.

Patterns are parsed with the standard library's regex parser. It reads a large common
subset of the `regex` module's syntax the same way; anything outside that subset (regex-
only syntax, POSIX classes, fuzzy `{e<=1}` quantifiers, verbose or case-insensitive
flags) gets the safe answer: None for both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import regex

try:  # Python 3.11+
    import re._constants as sre  # type: ignore[import-not-found]
    import re._parser as sre_parse  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as sre  # type: ignore[no-redef, unused-ignore]
    import sre_parse  # type: ignore[no-redef, unused-ignore]

# Look-behind wider than this is treated as unbounded: keeping it would cost more than it saves.
MAX_CONTEXT = 4096
# Character classes larger than this are not worth a prefilter.
MAX_CLASS = 256

_LEFT_LOOKING = {
    sre.AT_BEGINNING,
    sre.AT_BEGINNING_LINE,
    sre.AT_BEGINNING_STRING,
    sre.AT_BOUNDARY,
    sre.AT_NON_BOUNDARY,
    sre.AT_LOC_BOUNDARY,
    sre.AT_LOC_NON_BOUNDARY,
    sre.AT_UNI_BOUNDARY,
    sre.AT_UNI_NON_BOUNDARY,
}
_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT)}
_QUANTIFIER = re.compile(r"\{\d*(?:,\d*)?\}")


@dataclass(frozen=True)
class RegexProfile:
    lookbehind: int | None
    first_chars: frozenset[str] | None
    # False when the pattern is outside the analysable subset: nothing is assumed about it,
    # not even that its matches are independent of where a search starts (as with \G).
    analysed: bool = True
    # Texts every match starts with one of (() if unknown): one per branch of a top-level
    # alternation, or one for the whole pattern. A plain `str.find` for them tells where a
    # match can start, so the regex engine runs only where one can. A branch that is a
    # look-ahead counts with its content's prefix: its zero-width match starts there.
    literal_prefixes: tuple[str, ...] = ()
    # True when nothing precedes a prefix (no look-behind, anchor or look-ahead that could
    # refuse a position): then any piece of one at the buffer's end is a partial match.
    prefix_at_start: bool = False
    # True when every branch starts with a prefix, some behind look-behind assertions only
    # (`<a>|(?<=\})(?=\{)`): a piece of a prefix only such branches start with
    # (`guarded_prefixes`) may be refused, any other piece at the buffer's end is a partial
    # match, as with prefix_at_start.
    prefix_guarded: bool = False
    # For a pattern R* + REST (`\s*<think>`): a pattern for a run of R, and the texts REST
    # starts with one of, none of them with an R character ("" and () for other shapes).
    # A match is then a run of R and one of those texts; a partial one, a run of R and a
    # piece of one (maybe empty) at the buffer's end (see _led_by).
    led_by: str = ""
    led_prefixes: tuple[str, ...] = ()
    # How a held match can wait for a known text (see _runs and RegexDelimiter.waits).
    runs: tuple[Run, ...] = ()
    # Set when a search over a short text cannot run long whatever the text: every
    # repeat is of one character (or an optional group of such), no look-behind, no
    # back-reference, and one match attempt takes O(n^k) steps over n characters with
    # k <= CHEAP_REPEATS (the degree, see _attempt_degree: about the count of unbounded
    # repeats, those that stop where their rest can go on, like `[^"]*"`, not counted
    # but for the last). A search then takes O(n^(k + 1)), so over a few characters
    # (runtime.automaton.SHORT_SPANS[k]) it needs no time bound, whose cost (~2 us a
    # search) would dominate the scans of a stream.
    repeats: int | None = None
    # True when a branch can only match at the stream's first position (`^` without
    # MULTILINE, `\A`), which the parser's left context (lookbehind >= 1) rules out
    # anywhere else: the fields above then describe the pattern's other branches, the only
    # ones that can match past that position (see _options, _start_only).
    start_only: bool = False
    # For a pattern led by a run: whether some branch has a look-behind in front of its
    # run (`(?<=X)\s*<a>`), which can refuse a position and so the run (`guarded`), and
    # whether some branch has none (`bare`): a bare branch holds any run at the end; and
    # the texts only guarded branches start with (a piece of one may be refused), for such a
    # pattern or one with `prefix_guarded`.
    led_guarded: bool = False
    led_bare: bool = False
    guarded_prefixes: tuple[str, ...] = ()

    @property
    def cheap(self) -> bool:
        """Whether a search over a short text needs no time bound (see `repeats`)."""
        return self.repeats is not None

    @property
    def kind(self) -> str:
        """`prefiltered` (a first-character test can skip it) or `always-searched`."""
        return "always-searched" if self.first_chars is None else "prefiltered"


UNKNOWN = RegexProfile(lookbehind=None, first_chars=None, analysed=False)


# regex-only classes of one character: Unicode properties (\p{L}, \pL, \P{...}) and POSIX
# classes ([[:alpha:]]). Each is read as a stand-in class of one character (\w, \W):
# the structure is the same, and the stand-in's characters are never enumerated, so
# nothing is assumed about which characters it matches.
_REGEX_ONLY_CLASS = re.compile(r"\\[pP](?:\{[^}]*\}|[A-Za-z])|\[:(\^?)[A-Za-z]+:\]|\\.", re.DOTALL)


def _stand_in(match: re.Match[str]) -> str:
    text = match.group(0)
    if text.startswith("[:"):
        return r"\W" if match.group(1) else r"\w"
    if text[:2] in ("\\p", "\\P") and len(text) > 2:
        return r"\W" if text[1] == "P" else r"\w"
    return text  # any other escape, as written


def parse(pattern: str) -> Any:
    """The stdlib parse tree of `pattern`, or None outside the subset both engines share
    (regex-only one-character classes are read as stand-ins, see _REGEX_ONLY_CLASS)."""
    pattern = _REGEX_ONLY_CLASS.sub(_stand_in, pattern)
    if not _in_common_subset(pattern):
        return None
    try:
        tree = sre_parse.parse(pattern, re.DOTALL)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    if tree.state.flags & (re.VERBOSE | re.LOCALE):
        return None
    return tree


def profile(pattern: str) -> RegexProfile:
    tree = parse(pattern)
    if tree is None:
        return _by_head(pattern)
    items = list(tree)
    lookbehind = _lookbehind(items)
    if tree.state.flags & re.IGNORECASE:
        return RegexProfile(lookbehind=lookbehind, first_chars=None)
    runs = _runs(pattern, items, led=bool(_led_by(pattern, items)[0]))
    exact = _REGEX_ONLY_CLASS.sub(_stand_in, pattern) == pattern
    repeats = _cheap_repeats(_attempt_degree(items, exact))
    options = _options(items)
    later = [option for option in options if not _start_only(option, tree.state.flags)]
    start_only = len(later) < len(options)
    if not later:  # no match past the stream's first position
        return RegexProfile(
            lookbehind=lookbehind,
            first_chars=frozenset(),
            prefix_at_start=True,
            runs=runs,
            repeats=repeats,
            start_only=True,
        )
    if start_only:  # the other branches, as one alternation
        items = later[0] if len(later) == 1 else [(sre.BRANCH, (None, later))]
    chars, nullable = first(items)
    led_by, led_prefixes = ("", ()) if start_only else _led_by(pattern, items)
    guarded = False
    guarded_prefixes: tuple[str, ...] = ()
    if not led_by and _REGEX_ONLY_CLASS.sub(_stand_in, pattern) == pattern:
        led_by, led_prefixes, guarded, guarded_prefixes = _led_options(later)
    prefix_guarded = False
    if not led_by:
        prefix_guarded, guarded_prefixes = _guarded_options(later)
    return RegexProfile(
        lookbehind=lookbehind,
        first_chars=None if nullable or not chars else frozenset(chars),
        literal_prefixes=_literal_prefixes(items),
        led_by=led_by,
        led_prefixes=led_prefixes,
        prefix_at_start=bool(_leading_texts(items)) or _starts_with_literal(items),
        prefix_guarded=prefix_guarded,
        runs=runs,
        repeats=repeats,
        start_only=start_only,
        led_guarded=guarded,
        guarded_prefixes=guarded_prefixes,
        led_bare=bool(led_by) and not all(_guard_end(option) for option in later),
    )


def content_repeats(pattern: str) -> int | None:
    """RegexProfile.repeats of a content parser's pattern (a tag pattern, a string
    delimiter), which the parser searches over a region's body: None unless cheap. Group
    names are dropped first (a tag pattern may name `key` in each of its branches, which
    the stdlib parser refuses, and a name changes no match)."""
    tree = parse(_unnamed_groups(pattern))
    if tree is None or tree.state.flags & re.IGNORECASE:
        return None
    exact = _REGEX_ONLY_CLASS.sub(_stand_in, pattern) == pattern
    return _cheap_repeats(_attempt_degree(list(tree), exact))


def _unnamed_groups(pattern: str) -> str:
    """`pattern` with each named group `(?P<name>...)` made a plain group `(...)`; text in
    a character class or after a backslash is left as it is."""
    pieces: list[str] = []
    index, in_class = 0, False
    while index < len(pattern):
        char = pattern[index]
        step = 1
        if char == "\\":
            step = 2  # the escaped character with it
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if pattern.startswith("]", index + 1):
                step = 2  # a leading ] is a literal
            elif pattern.startswith("^]", index + 1):
                step = 3
        elif pattern.startswith("(?P<", index) and pattern.find(">", index) != -1:
            pieces.append("(")
            index = pattern.find(">", index) + 1
            continue
        pieces.append(pattern[index : index + step])
        index += step
    return "".join(pieces)


def _by_head(pattern: str) -> RegexProfile:
    """The profile of a pattern the analysis cannot read (`(?&obj)` recursion, conditional
    groups), from its head: the longest leading part, ending before a group at the top
    level, that it reads, when the pattern is that head followed by the rest (no top-level
    `|`, no global flags after it). A match of the pattern starts with a match of the head,
    so where one can start is the head's (first characters, literal prefixes, a start-only
    branch, a leading run); anything else stays unknown (no time-bound-free searches, no
    waiting, no reuse of results, the whole stream kept for look-behind)."""
    head = _head(pattern)
    if head is None:
        return UNKNOWN
    known = profile(head)
    if not known.analysed:
        return UNKNOWN
    return RegexProfile(
        lookbehind=None,
        runs=_object_runs(head, pattern[len(head) :]),
        first_chars=known.first_chars,
        literal_prefixes=known.literal_prefixes,
        led_by=known.led_by,
        led_prefixes=known.led_prefixes,
        prefix_at_start=known.prefix_at_start,
        prefix_guarded=known.prefix_guarded,
        start_only=known.start_only,
        led_guarded=known.led_guarded,
        led_bare=known.led_bare,
        guarded_prefixes=known.guarded_prefixes,
        analysed=False,
    )


# The one recursive idiom the analysis reads: a JSON object, matched by a group defined as
# OBJECT (below, with NAME its name) and called once, right after the head (llama3_json).
_CALLED_OBJECT = re.compile(
    r"\(\?P<\w+>\(\?&(\w+)\)\)\(\?\(DEFINE\)\(\?P<(\w+)>(.*)\)\)", re.DOTALL
)
_JSON_OBJECT = r'\{(?:[^{}"]++|"(?:[^"\\]++|\\.)*+"|(?&NAME))*+\}'


def _object_runs(head: str, rest: str) -> tuple[Run, ...]:
    """The wait of HEAD followed by a call of a JSON-object group (_JSON_OBJECT, see
    runtime.waiting.HeldObject), when HEAD consumes no `{`: then a match of HEAD ending
    at a `{` is the one the pattern's object starts after, wherever HEAD may end; and when
    its look-arounds stay within reach (_looks_past_object)."""
    called = _CALLED_OBJECT.fullmatch(rest)
    if called is None or called[1] != called[2]:
        return ()
    if called[3] != _JSON_OBJECT.replace("NAME", called[1]):
        return ()
    tree = parse(head)
    if tree is None or _may_consume(list(tree), "{") or _looks_past_object(list(tree)):
        return ()
    return (Run(head, None, "}", json_object=True, required=_required_literal(tree)),)


def _required_literal(tree: Any) -> str:
    """The longest literal that every match of the parse tree `tree` has at or after its
    start, in the text it consumes or a look-ahead sees ("" if none is known)."""
    if tree.state.flags & re.IGNORECASE:
        return ""
    return _longest_required(list(tree))


def _longest_required(items: list[Any]) -> str:
    best = run = ""
    for op, av in items:
        if op is sre.LITERAL:
            run += chr(av)
            continue
        best, run = max(best, run, key=len), ""
        if op is sre.ASSERT and av[0] > 0:  # a look-ahead (a look-behind sees before the start)
            inner = _longest_required(list(av[1]))
        elif op is sre.SUBPATTERN and not av[1] & re.IGNORECASE:
            inner = _longest_required(list(av[-1]))
        elif op in _REPEATS and av[0] >= 1:
            inner = _longest_required(list(av[2]))
        else:
            continue
        best = max(best, inner, key=len)
    return max(best, run, key=len)


def _looks_past_object(items: list[Any]) -> bool:
    """Whether a look-around of HEAD may see past the edges of an object it precedes: a
    look-behind that may consume `{`, a look-ahead that may consume `}`, or a negative one.

    A match of HEAD later in the held text can start a second object, which the reference's
    partial search prefers to the held one once it completes (HeldObject.follow watches for
    that). Without such look-arounds, telling where one may start needs only the text from
    the held object's `{` on, and whether it has is settled before that object can close."""
    for op, av in items:
        if op is sre.ASSERT_NOT:
            return True
        if op is sre.ASSERT:
            direction, inner = av
            if _may_consume(list(inner), "{" if direction < 0 else "}"):
                return True
            if _looks_past_object(list(inner)):
                return True
        elif any(_looks_past_object(child) for child in _children(op, av)):
            return True
    return False


def _may_consume(items: list[Any], char: str) -> bool:
    """Whether a match of `items` may consume `char` (look-arounds consume nothing)."""
    for op, av in items:
        if op in (sre.ASSERT, sre.ASSERT_NOT, sre.AT):
            continue
        children = _children(op, av)
        if children:
            if any(_may_consume(child, char) for child in children):
                return True
        elif _matches(op, av, char) is not False:
            return True
    return False


# A flag group that sets flags for the whole pattern (`(?i)`, `(?V1)`), wherever it is.
_GLOBAL_FLAGS = re.compile(r"\(\?[a-zA-Z0-9-]+\)")


def _head(pattern: str) -> str | None:
    """The longest part of `pattern` before a top-level group that `parse` reads, when the
    pattern is a sequence of atoms (no top-level `|`) and no global flag group follows
    that part; None if there is none."""
    atoms = _atoms(pattern)
    if atoms is None:
        return None
    for start, _end in reversed(atoms):
        if (
            start
            and pattern[start] == "("
            and _GLOBAL_FLAGS.search(pattern, start) is None
            and parse(pattern[:start]) is not None
        ):
            return pattern[:start]
    return None


# A pattern is read as at most this many alternatives (_options); past that, as it is.
MAX_OPTIONS = 16
_AT_START = (sre.AT_BEGINNING, sre.AT_BEGINNING_STRING)


def _options(items: list[Any]) -> list[list[Any]]:
    """The pattern as alternatives tried one after the other: `(?:A|B)S` as `AS`, `BS`,
    through groups that change no flag (a capturing group's number is of no concern to
    the analysis). [items] for any other shape, or past MAX_OPTIONS."""
    if not items:
        return [items]
    op, av = items[0]
    if op is sre.SUBPATTERN and not av[1] and not av[2]:
        return _options(list(av[-1]) + items[1:])
    if op is not sre.BRANCH:
        return [items]
    options: list[list[Any]] = []
    for branch in av[1]:
        options.extend(_options(list(branch) + items[1:]))
        if len(options) > MAX_OPTIONS:
            return [items]
    return options


def _start_only(option: list[Any], flags: int) -> bool:
    """Whether an alternative can only match at the start of the text: it begins with `\\A`,
    or with `^` when MULTILINE is off (under MULTILINE `^` also matches after a newline)."""
    if not option or option[0][0] is not sre.AT:
        return False
    at = option[0][1]
    return at is sre.AT_BEGINNING_STRING or (at is sre.AT_BEGINNING and not flags & re.MULTILINE)


def _guard_end(option: list[Any]) -> int:
    """How many look-behind assertions an alternative starts with: they look at text before
    the match and can only refuse a position, never consume."""
    index = 0
    while (
        index < len(option)
        and option[index][0] in (sre.ASSERT, sre.ASSERT_NOT)
        and option[index][1][0] < 0
    ):
        index += 1
    return index


def _led_options(options: list[list[Any]]) -> tuple[str, tuple[str, ...], bool, tuple[str, ...]]:
    """_led_by for a pattern read as alternatives (`(?:\\s*<a>|(?<=</b>))\\s*<c>` as
    `\\s*<a>\\s*<c>`, `(?<=</b>)\\s*<c>`), each maybe behind look-behind assertions: when
    each is (look-behinds) R* REST with one R, REST starting with literal texts none of
    which starts with an R character. A look-behind can only refuse a match, so every match
    is still a run of R and one of the texts. (run pattern, texts, whether some alternative
    is guarded by a look-behind, the texts only guarded ones start with); ("", (), False,
    ()) for any other shape."""
    run_item: Any = None
    texts: list[str] = []
    bare: set[str] = set()
    guarded = False
    none: tuple[str, tuple[str, ...], bool, tuple[str, ...]] = ("", (), False, ())
    for option in options:
        index = _guard_end(option)
        guarded = guarded or index > 0
        if index >= len(option):
            return none
        op, av = option[index]
        if op is not sre.MAX_REPEAT or av[0] != 0 or av[1] != sre.MAXREPEAT:
            return none
        if run_item is None:
            run_item = option[index]
        elif str(option[index]) != str(run_item):
            return none
        found = _leading_texts(option[index + 1 :])
        if not found:
            return none
        texts.extend(found)
        if not index:
            bare.update(found)
    if run_item is None:
        return none
    char = _class_source(list(run_item[1][2]))
    if char is None:
        return none
    run = char + "*"
    compiled = regex.compile(run, regex.DOTALL)  # the engine that will run it
    unique = tuple(dict.fromkeys(texts))
    if any(compiled.fullmatch(text[0]) for text in unique):
        return none
    return run, unique, guarded, tuple(text for text in unique if text not in bare)


def _guarded_options(options: list[list[Any]]) -> tuple[bool, tuple[str, ...]]:
    """For a pattern read as alternatives, each a prefix behind look-behind assertions or
    none (`<a>\\s*`, `(?<=\\})(?=\\{)`): (whether some alternative has a look-behind, the
    texts only those start with); (False, ()) when some alternative starts otherwise.
    A look-behind can only refuse a position, so a piece of any other text at the buffer's
    end is a partial match."""
    bare: set[str] = set()
    texts: list[str] = []
    guarded = False
    for option in options:
        index = _guard_end(option)
        found = _look_ahead_texts(option) or _leading_texts(option[index:])
        if not found:
            return False, ()
        guarded = guarded or index > 0
        texts.extend(found)
        if not index:
            bare.update(found)
    if not guarded:
        return False, ()
    return True, tuple(text for text in dict.fromkeys(texts) if text not in bare)


_CATEGORIES = {
    sre.CATEGORY_SPACE: r"\s",
    sre.CATEGORY_NOT_SPACE: r"\S",
    sre.CATEGORY_DIGIT: r"\d",
    sre.CATEGORY_NOT_DIGIT: r"\D",
    sre.CATEGORY_WORD: r"\w",
    sre.CATEGORY_NOT_WORD: r"\W",
}


def _class_source(body: list[Any]) -> str | None:
    """The source of a repeat's body of one character, for a category (`\\s`) or a literal,
    checked by reparsing it; None for anything else."""
    if len(body) != 1:
        return None
    op, av = body[0]
    source = None
    if op is sre.LITERAL:
        source = regex.escape(chr(av))
    elif op is sre.IN and len(av) == 1 and av[0][0] is sre.CATEGORY:
        source = _CATEGORIES.get(av[0][1])
    if source is None:
        return None
    tree = parse(source)
    return source if tree is not None and str(list(tree)) == str(body) else None


class Run(NamedTuple):
    """A held match that only a known text can change (RegexDelimiter.waits)."""

    head: str  # the pattern's text before a repeat of one character class
    run: str | None  # a pattern for a run of that class (None: any character)
    literal: str  # the literal that follows the repeat ("" if the pattern goes on otherwise)
    # HEAD is followed by a JSON object, not a run (runtime.waiting.HeldObject, _object_runs).
    json_object: bool = False
    # For a JSON object: a literal every match of HEAD has at or after its start ("" if none).
    required: str = ""


_GROUP = re.compile(r"\A\((?:\?P<\w+>|\?:)?(.*)\)\Z", re.DOTALL)
_QUANTIFIED = re.compile(r"\A(.*?)(?:[*+]|\{(?:0|1)?,\})[?+]?\Z", re.DOTALL)


def _runs(pattern: str, items: list[Any], led: bool = False) -> tuple[Run, ...]:
    """Every way a held match of `pattern` can wait (see RegexDelimiter.waits); `led`:
    the pattern is led by a run (_led_by), whose leading repeat waits too (HEAD empty).

    Pattern = HEAD + R* + REST, with R one character class (or any character) repeated
    from 0 or 1 times without bound, possibly in a group of its own. Once HEAD has
    matched at the held position and the rest of the buffer is a run of R, the match is
    partial (or complete at the buffer's end) and stays so while R-characters arrive,
    provided REST is a literal (then its arrival is watched too) or cannot start with an
    R-character. A lazy repeat with nothing after it matches empty and commits at once.

    Also Pattern = HEAD + (?=(?:(?!X).)*?Y), a look-ahead for a literal Y with no X before
    it (glm45 opens a call only once its close is in sight): once HEAD has matched, the
    match is partial until Y or X arrives, so it waits for their common suffix.
    """
    runs: list[Run] = []
    ahead = _look_ahead_run(pattern, items)
    if ahead is not None:
        runs.append(ahead)
    for index, (op, av) in enumerate(items):
        repeat = _single_repeat(op, av)
        # A leading repeat waits only in a pattern led by a run (_led_by): a held match of
        # `\s*<think>` is a run of whitespace until a non-space or `<think>` arrives.
        if repeat is None or (index == 0 and not led):
            continue
        lazy, body = repeat
        rest = items[index + 1 :]
        literal = "".join(chr(value) for _, value in rest) if _all_literal(rest) else None
        if lazy and not rest:
            continue
        span = _source_span(pattern, items, index)
        if span is None:
            continue
        head, text = pattern[: span[0]], pattern[span[0] : span[1]]
        run = _run_pattern(text, body)
        if run is False:
            continue
        if literal is None:
            starts, _ = first(rest)
            if run is None or starts is None:
                continue  # what follows could start inside the run
            compiled = regex.compile(run, regex.DOTALL)  # the engine that will run it
            if any(compiled.fullmatch(char) for char in starts):
                continue
            literal = ""
        runs.append(Run(head, run, literal))
    return tuple(runs)


def _look_ahead_run(pattern: str, items: list[Any]) -> Run | None:
    """The wait of a pattern that ends with (?=R*?Y) or (?=R*Y), R any character, maybe
    written (?:(?!X).) with X a literal, and Y a literal: (HEAD, any character, the text
    both X and Y end with), or None for other shapes."""
    if len(items) < 2 or items[-1][0] is not sre.ASSERT or items[-1][1][0] != 1:
        return None
    inner = list(items[-1][1][1])
    if not inner or inner[0][0] not in (sre.MAX_REPEAT, sre.MIN_REPEAT):
        return None
    low, high, body = inner[0][1]
    body = list(body)
    if low != 0 or high != sre.MAXREPEAT or not _all_literal(inner[1:]) or len(inner) < 2:
        return None
    awaited = "".join(chr(value) for _, value in inner[1:])
    if len(body) == 1 and body[0][0] is sre.SUBPATTERN:
        body = list(body[0][1][-1])
    wake = awaited
    if len(body) == 2 and body[0][0] is sre.ASSERT_NOT and body[1][0] is sre.ANY:
        direction, refused = body[0][1]
        refused = list(refused)
        if direction != 1 or not refused or not _all_literal(refused):
            return None
        wake = _common_suffix(awaited, "".join(chr(value) for _, value in refused))
    elif len(body) != 1 or body[0][0] is not sre.ANY:
        return None
    span = _source_span(pattern, items, len(items) - 1)
    if not wake or span is None:
        return None
    return Run(pattern[: span[0]], None, wake)


def _common_suffix(first: str, second: str) -> str:
    size = 0
    while size < min(len(first), len(second)) and first[-1 - size] == second[-1 - size]:
        size += 1
    return first[len(first) - size :]


def _single_repeat(op: Any, av: Any) -> tuple[bool, list[Any]] | None:
    """(lazy, body) for a repeat of one character, from 0 or 1 times without bound
    (optionally alone in a group); None otherwise."""
    if op is sre.SUBPATTERN:
        inner = list(av[-1])
        return _single_repeat(*inner[0]) if len(inner) == 1 else None
    if op not in (sre.MAX_REPEAT, sre.MIN_REPEAT):
        return None
    low, high, body = av
    body = list(body)
    if low > 1 or high != sre.MAXREPEAT or len(body) != 1:
        return None
    if body[0][0] not in (sre.ANY, sre.LITERAL, sre.NOT_LITERAL, sre.IN):
        return None
    return op is sre.MIN_REPEAT, body


def _all_literal(items: list[Any]) -> bool:
    return all(op is sre.LITERAL for op, _ in items)


def _source_span(pattern: str, items: list[Any], index: int) -> tuple[int, int] | None:
    """Where item `index` of the parse tree is written in `pattern`, or None.

    The top level is split into atoms (an escape, a set, a group or a character, each
    with its quantifier); the atom's span is then checked by reparsing both sides, so
    a split this function gets wrong only loses the optimisation. Linear in the pattern:
    no search over every cut.
    """
    spans = _atoms(pattern)
    if spans is None or index >= len(spans) or len(spans) != len(items):
        return None
    start, end = spans[index]
    head, item = parse(pattern[:start]), parse(pattern[start:end])
    if head is None or item is None or str(list(head)) != str(items[:index]):
        return None
    return (start, end) if str(list(item)) == str(items[index : index + 1]) else None


_QUANTIFIER_AT = re.compile(r"(?:[*+?]|\{\d*(?:,\d*)?\})[?+]?")


def _atoms(pattern: str) -> list[tuple[int, int]] | None:
    """The spans of the pattern's top-level atoms with their quantifiers; None for a
    top-level alternation or unbalanced text."""
    spans: list[tuple[int, int]] = []
    index, size = 0, len(pattern)
    while index < size:
        start, char = index, pattern[index]
        if char == "\\":
            index += 2
            if pattern[index - 1 : index] in ("p", "P", "N") and pattern.startswith("{", index):
                index = pattern.find("}", index) + 1
                if index == 0:
                    return None
            elif pattern[index - 1 : index] in ("p", "P"):
                index += 1  # \pL: a one-letter property
        elif char == "[":
            index = _set_end(pattern, index)
        elif char == "(":
            index = _group_end(pattern, index)
        elif char == "|":
            return None
        else:
            index += 1
        if index <= start or index > size:
            return None
        quantifier = _QUANTIFIER_AT.match(pattern, index)
        if quantifier is not None:
            index = quantifier.end()
        spans.append((start, index))
    return spans


def _set_end(pattern: str, index: int) -> int:
    """The index after the set that starts at `index` ('[')."""
    index += 1
    if pattern.startswith("^", index):
        index += 1
    if pattern.startswith("]", index):
        index += 1
    while index < len(pattern):
        if pattern[index] == "\\":
            index += 2
        elif pattern[index] == "]":
            return index + 1
        else:
            index += 1
    return -1


def _group_end(pattern: str, index: int) -> int:
    """The index after the group that starts at `index` ('(')."""
    depth = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            index = _set_end(pattern, index)
            if index == -1:
                return -1
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return -1


def _run_pattern(text: str, body: list[Any]) -> str | Literal[False] | None:
    """A pattern for a run of the repeat written as `text` (its body item `body`): None
    for any character, False if its source cannot be isolated."""
    if body[0][0] is sre.ANY:
        return None
    group = _GROUP.match(text)
    if group is not None:
        text = group.group(1)
    quantified = _QUANTIFIED.match(text)
    if quantified is None:
        return False
    char = quantified.group(1)
    tree = parse(char)
    if tree is None or str(list(tree)) != str(body):
        return False
    return char + "*"  # one item: the quantifier applies to all of it


def literal_suffix(pattern: str) -> str:
    """Text every match of `pattern` ends with ("" if none, or if that cannot be known).

    Patterns with look-arounds get "": a search cut off after the suffix's last
    occurrence gives the same matches only when nothing looks past where a match ends.
    """
    tree = parse(pattern)
    if tree is None or tree.state.flags & re.IGNORECASE or _looks_around(list(tree)):
        return ""
    items = list(tree)
    suffix: list[str] = []
    while items and items[-1][0] is sre.LITERAL:
        suffix.insert(0, chr(items.pop()[1]))
    return "".join(suffix)


def _looks_around(items: list[Any]) -> bool:
    for op, av in items:
        if op in (sre.ASSERT, sre.ASSERT_NOT):
            return True
        if any(_looks_around(child) for child in _children(op, av)):
            return True
    return False


def _literal_prefix(items: list[Any]) -> str:
    """The literal characters every match begins with (zero-width assertions skipped)."""
    prefix = []
    for op, av in items:
        if op is sre.LITERAL:
            prefix.append(chr(av))
        elif op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT) and not prefix:
            continue  # consumes nothing: the match still starts with what follows
        else:
            break
    return "".join(prefix)


def _branches(items: list[Any]) -> list[list[Any]]:
    """The branches of a pattern that is one alternation; [items] for any other."""
    if len(items) == 1 and items[0][0] is sre.BRANCH:
        return [list(branch) for branch in items[0][1][1]]
    return [items]


def _literal_prefixes(items: list[Any]) -> tuple[str, ...]:
    """The texts every match starts with one of, or () if some branch has none."""
    texts = _leading_texts(items)
    if texts:
        return texts
    whole = _literal_prefix(items)  # after an assertion
    if whole:
        return (whole,)
    prefixes: list[str] = []
    for option in _options(items):
        texts = _look_ahead_texts(option) or _leading_texts(option)
        if not texts:
            prefix = _literal_prefix(option)
            texts = (prefix,) if prefix else ()
        if not texts:
            return ()
        prefixes.extend(texts)
    return tuple(dict.fromkeys(prefixes))


def _look_ahead_texts(option: list[Any]) -> tuple[str, ...]:
    r"""For an alternative that starts with a look-ahead, behind look-behinds if any
    (`(?<=\})(?=\{)`, `(?=<a>|<b>)`): the texts the look-ahead's content starts with one
    of, () if none is known. Its match starts where that content matches (the look-behinds
    can only refuse a position)."""
    index = _guard_end(option)
    if index < len(option) and option[index][0] is sre.ASSERT:
        direction, inner = option[index][1]
        if direction == 1:
            body = list(inner)
            prefix = _literal_prefix(body)
            return _leading_texts(body) or ((prefix,) if prefix else ())
    return ()


def _led_by(pattern: str, items: list[Any]) -> tuple[str, tuple[str, ...]]:
    """(a pattern for a run of R, the texts REST starts with) for a pattern R* + REST, R one
    character class repeated greedily from zero times without bound, when every match of
    REST starts with a literal one of those texts and none of them starts with an R
    character: then a match is a run of R and one of the texts, and a partial match a run
    of R and a piece of one (maybe empty) running into the buffer's end. ("", ()) for any
    other shape."""
    if len(items) < 2 or items[0][0] is not sre.MAX_REPEAT or items[0][1][0] != 0:
        return "", ()
    repeat = _single_repeat(*items[0])
    spans = _atoms(pattern)
    if repeat is None or not spans:
        return "", ()
    written = pattern[: spans[0][1]]  # the first atom, checked by reparsing it
    tree = parse(written)
    if tree is None or str(list(tree)) != str(items[:1]):
        return "", ()
    run = _run_pattern(written, repeat[1])
    texts = _leading_texts(items[1:])
    if not run or not texts:
        return "", ()
    compiled = regex.compile(run, regex.DOTALL)  # the engine that will run it
    if any(compiled.fullmatch(text[0]) for text in texts):
        return "", ()
    return run, texts


def _leading_texts(items: list[Any]) -> tuple[str, ...]:
    r"""The literal texts every match of `items` starts with one of, each non-empty, through
    groups, alternations and optional groups (`(?:<a>\s*)?<b>`: "<a>" or "<b>"); () when
    some match may start otherwise (or not at all, with no text)."""
    if not items:
        return ()
    op, av = items[0]
    if op is sre.LITERAL:
        # A literal run, and what follows it when that starts with literals too: the
        # parser factors common prefixes out (`</a>|</b>` reads as `</` + `a>|b>`).
        text = _literal_prefix(items)
        more = _leading_texts(items[len(text) :]) if len(text) < len(items) else ()
        return tuple(text + tail for tail in more) if more else (text,)
    if op is sre.SUBPATTERN and not av[1] and not av[2]:  # a group that changes no flag
        return _leading_texts(list(av[-1]) + items[1:])
    options: list[list[Any]] = []
    if op is sre.BRANCH:
        options = [list(branch) + items[1:] for branch in av[1]]
    elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and av[0] == 0 and av[1] == 1:
        options = [list(av[2]) + items[1:], items[1:]]
    texts: list[str] = []
    for option in options:
        found = _leading_texts(option)
        if not found:
            return ()
        texts.extend(found)
    return tuple(dict.fromkeys(texts))


def _starts_with_literal(items: list[Any]) -> bool:
    """Whether every branch starts with a literal character, or is a look-ahead whose
    content does (it then matches, or partially matches, where its content would), so
    that nothing can refuse a piece of a prefix (see prefix_at_start)."""
    return bool(items) and all(
        bool(branch) and _first_is_literal(branch) for branch in _branches(items)
    )


def _first_is_literal(branch: list[Any]) -> bool:
    op, av = branch[0]
    if op is sre.ASSERT and len(branch) == 1 and av[0] == 1:
        inner = list(av[1])
        return bool(inner) and inner[0][0] is sre.LITERAL
    return op is sre.LITERAL


# At most this degree for a pattern to be cheap (RegexProfile.cheap, RegexProfile.repeats).
CHEAP_REPEATS = 3
_ONE_CHARACTER = (sre.ANY, sre.LITERAL, sre.NOT_LITERAL, sre.IN, sre.CATEGORY)
_TOO_MANY = CHEAP_REPEATS + 1
# What may follow a place in a pattern: the characters a match goes on with from there
# (whether it can also end there does not matter); None when not known.
_Follow = frozenset[str] | None


def _cheap_repeats(degree: int) -> int | None:
    """RegexProfile.repeats: the degree, if the pattern is cheap."""
    return degree if degree <= CHEAP_REPEATS else None


def _attempt_degree(items: list[Any], exact: bool) -> int:
    """The degree k of one match attempt, which takes O(n^k) steps over n characters
    (a search, O(n^(k + 1))); more than CHEAP_REPEATS when some construct can make a
    search costly whatever the degree (a repeated group, a look-behind, a back-reference).

    Each repeat of one character with no small upper bound costs O(n) each time the
    attempt reaches it, and the attempt reaches an item once for each way of ending the
    unbounded repeats before it: O(n) ways for each of those that can end in many places
    the attempt goes on from, one way for a repeat that stops where its rest can go on
    (`[^"]*` before `"`: giving back a character leaves one the rest cannot start with,
    which fails at once). k is the largest count of such repeats before a repeat, plus
    one. `exact` is False when the tree holds stand-in classes (see _REGEX_ONLY_CLASS),
    whose characters are not the real ones: then no repeat is taken to stop.
    """
    return _degree(items, 0, frozenset() if exact else None)[1]


def _degree(items: list[Any], before: int, follow: _Follow) -> tuple[int, int]:
    """(repeats that end in many places, on the costliest way through `items`, counting
    `before` ones before it; the degree of `items` reached that way), where `follow` is
    what may follow `items` (None: not known, and no repeat is taken to stop)."""
    degree = 0
    for index, (op, av) in enumerate(items):
        after = _follow(items[index + 1 :], follow)
        if op in _REPEATS:
            high, body = av[1], list(av[2])
            if len(body) == 1 and body[0][0] in _ONE_CHARACTER:
                if high > 1:
                    degree = max(degree, before + 1)
                    before += not _stops_before(body[0], after)
            elif high <= 1:
                before, inner = _degree(body, before, after)
                degree = max(degree, inner)
            else:
                return before, _TOO_MANY
        elif op is sre.BRANCH:
            ways = [_degree(list(branch), before, after) for branch in av[1]]
            before = max(way[0] for way in ways)
            degree = max(degree, *(way[1] for way in ways))
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            direction, body = av
            if direction < 0:
                return before, _TOO_MANY
            before, inner = _degree(list(body), before, None)
            degree = max(degree, inner)
        elif op is sre.SUBPATTERN or op is getattr(sre, "ATOMIC_GROUP", None):
            flagged = op is sre.SUBPATTERN and (av[1] or av[2])  # (?i:...) and the like
            children = _children(op, av)[0]
            before, inner = _degree(children, before, None if flagged else after)
            degree = max(degree, inner)
        elif op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
            return before, _TOO_MANY
        elif op not in _ONE_CHARACTER and op is not sre.AT:
            return before, _TOO_MANY  # anything not known to be cheap
        if degree > CHEAP_REPEATS:
            return before, _TOO_MANY
    return before, degree


def _follow(rest: list[Any], outer: _Follow) -> _Follow:
    """What may follow a place whose rest of the sequence is `rest`, `outer` after it."""
    if outer is None:
        return None
    chars, nullable = first(rest)
    if chars is None:
        return None
    return frozenset(chars) | outer if nullable else frozenset(chars)


def _stops_before(item: tuple[Any, Any], follow: _Follow) -> bool:
    """Whether a repeat of the one-character `item` stops where what follows it can go
    on: no character of `follow` is one `item` matches."""
    if follow is None:
        return False
    return not any(_matches(item[0], item[1], char) is not False for char in follow)


def _matches(op: Any, av: Any, char: str) -> bool | None:
    """Whether the one-character item (op, av) matches `char`; None when not known."""
    if op is sre.LITERAL:
        return char == chr(av)
    if op is sre.NOT_LITERAL:
        return char != chr(av)
    if op is sre.CATEGORY:
        source = _CATEGORIES.get(av)  # the engine that will run it decides
        return None if source is None else regex.fullmatch(source, char) is not None
    if op is sre.IN:
        negate, found = False, False
        for inner_op, inner_av in av:
            if inner_op is sre.NEGATE:
                negate = True
            elif inner_op is sre.RANGE:
                found = found or inner_av[0] <= ord(char) <= inner_av[1]
            else:
                hit = _matches(inner_op, inner_av, char)
                if hit is None:
                    return None
                found = found or hit
        return found != negate
    return None  # `.`, and anything else: it may match


def _in_common_subset(pattern: str) -> bool:
    """Reject syntax that `re` and `regex` could read differently."""
    if any(token in pattern for token in ("[:", "[=", "[.")):
        return False  # POSIX classes in regex, literal text in re
    index = 0
    in_class = False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            if char == "[":
                return False  # a nested set: regex's version 1 syntax
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if pattern.startswith("]", index + 1) or pattern.startswith("^]", index + 1):
                index += 2 if pattern[index + 1] == "]" else 3  # a leading ] is a literal
                continue
        elif char == "{" and not _QUANTIFIER.match(pattern, index):
            return False  # regex reads e.g. {e<=1} as a fuzzy-match constraint
        index += 1
    return True


def _lookbehind(items: list[Any]) -> int | None:
    need = 0
    for op, av in items:
        if op is sre.AT:
            if av in _LEFT_LOOKING:
                need = max(need, 1)
            continue
        if op in (sre.ASSERT, sre.ASSERT_NOT):
            direction, sub = av
            inner = _lookbehind(list(sub))
            if inner is None:
                return None
            if direction < 0:
                width = sub.getwidth()[1]
                if width > MAX_CONTEXT:
                    return None
                inner += width
            need = max(need, inner)
            continue
        for sub in _children(op, av):
            inner = _lookbehind(sub)
            if inner is None:
                return None
            need = max(need, inner)
    return need if need <= MAX_CONTEXT else None


def _children(op: Any, av: Any) -> list[list[Any]]:
    """The sub-sequences nested in one parse-tree item."""
    if op is sre.SUBPATTERN:
        return [list(av[-1])]
    if op is sre.BRANCH:
        return [list(alternative) for alternative in av[1]]
    if op in _REPEATS:
        return [list(av[2])]
    if op is getattr(sre, "ATOMIC_GROUP", None):
        return [list(av)]
    if op is sre.GROUPREF_EXISTS:
        return [list(branch) for branch in av[1:] if branch is not None]
    return []


def first(items: list[Any]) -> tuple[set[str] | None, bool]:
    """The characters a match of `items` can start with, and whether it can be empty."""
    chars: set[str] = set()
    for op, av in items:
        head, nullable = _first_of(op, av)
        if head is None:
            return None, True
        chars |= head
        if not nullable:
            return chars, False
    return chars, True


def _first_of(op: Any, av: Any) -> tuple[set[str] | None, bool]:
    if op is sre.LITERAL:
        return {chr(av)}, False
    if op is sre.IN:
        return _class_chars(av), False
    if op is sre.ASSERT and av[0] == 1:
        # A look-ahead: whatever matches here, empty or not, sits right before a character
        # that can start the look-ahead's pattern (a match of `</think>|(?=<tool_call>)`
        # only occurs before a '<'), so those characters stand for it.
        head, nullable = first(list(av[1]))
        return (head, False) if head and not nullable else (None, True)
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return set(), True  # zero-width: the match goes on at the same position
    if op is sre.SUBPATTERN:
        add_flags = av[1]
        if add_flags & (re.IGNORECASE | re.VERBOSE | re.LOCALE):
            return None, True
        return first(list(av[-1]))
    if op is getattr(sre, "ATOMIC_GROUP", None):
        return first(list(av))
    if op is sre.BRANCH:
        chars: set[str] = set()
        any_nullable = False
        for alternative in av[1]:
            head, nullable = first(list(alternative))
            if head is None:
                return None, True
            chars |= head
            any_nullable = any_nullable or nullable
        return chars, any_nullable
    if op in _REPEATS:
        low, high, sub = av
        if high == 0:
            return set(), True
        head, nullable = first(list(sub))
        return head, nullable or low == 0
    return None, True  # any character, backreferences, conditionals: unknown


def nullable(items: list[Any]) -> bool:
    """Whether a sequence of parse-tree items can match the empty string."""
    return all(_item_nullable(op, av) for op, av in items)


def _item_nullable(op: Any, av: Any) -> bool:
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT, sre.GROUPREF):
        return True
    if op is sre.SUBPATTERN:
        return nullable(list(av[-1]))
    if op is getattr(sre, "ATOMIC_GROUP", None):
        return nullable(list(av))
    if op is sre.BRANCH:
        return any(nullable(list(alternative)) for alternative in av[1])
    if op in _REPEATS:
        return av[0] == 0 or nullable(list(av[2]))
    if op is sre.GROUPREF_EXISTS:
        return any(branch is None or nullable(list(branch)) for branch in av[1:])
    return False  # consumes a character


def _class_chars(items: list[Any]) -> set[str] | None:
    chars: set[str] = set()
    for op, av in items:
        if op is sre.LITERAL:
            chars.add(chr(av))
        elif op is sre.RANGE and av[1] - av[0] < MAX_CLASS:
            chars.update(chr(code) for code in range(av[0], av[1] + 1))
        else:
            return None  # negation, categories (\d, \w), big ranges
        if len(chars) > MAX_CLASS:
            return None
    return chars
