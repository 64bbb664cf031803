"""The hidden world of the synthetic `oracle` model (models/oracle.py): its settings, its seeded
ground truth, and how it reads the prompts the real system gives it.

This is NOT a language model. It exists to test the method end to end (issue 28): every memory
item has a hidden usefulness per operator category and goal (a correct kernel, a faster one), drawn
from a seed; the generator adopts truly useful items more often (and is sometimes wrong), and
writes a correct kernel, or in an optimisation round a faster one, with a probability that grows
with the truly useful items it adopted (the harness measures the speed). Whether the system as built learns
which items are useful (ATU, UGC, retrieval) can then be measured against the truth, which no
part of the system sees.

Identity of an item: its title, as the round prompt renders it (`[E<id>] <title> (type: ...)`),
or a resident rule's first line (`[R<id>] <rule>`), whose text this generator writes as the
item's title (and the memory's fallback rule starts with the title too). Ids are not used: they
differ between workspaces, titles do not.

Every draw is a pure function of (seed, what it is about), a hash, never a stateful RNG: a
resumed stream, a replay stream in another process and a test all see the same world, and the
success draws of one (operator, round) are shared by every method (common random numbers), so
the methods differ only by what their memories put in front of the generator.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path

from sagekernel.errors import SageError
from sagekernel.models.backend import estimate_tokens


class OracleConfigError(SageError):
    """An `oracle:` spec with an unknown key or a value out of range."""


@dataclass(frozen=True)
class OracleConfig:
    """`oracle:key=value,...`: every setting of the synthetic world. The defaults were set before
    the method's streams were run, not fitted to make any method win (docs/oracle.md)."""

    seed: int = 0  #: the hidden world (usefulness, difficulty, every draw)
    base: float = 0.22  #: P(a correct kernel in one round) of a level-1 operator with nothing useful adopted
    level_drop: float = 0.05  #: subtracted from `base` per level above 1
    spread: float = 0.2  #: per-operator difficulty: base +- spread/2, drawn per operator
    gain: float = 0.2  #: added per truly useful item or rule adopted
    harm: float = 0.05  #: subtracted per adopted item or rule that is not useful
    useful_home: float = 0.5  #: P(useful) of an item for operators of its own category
    useful_general: float = 0.3  #: P(useful) of a seed item of category "General", for any operator
    useful_other: float = 0.08  #: P(useful) of an item for another category
    adopt_useful: float = 0.8  #: P(adopt | truly useful): the agent sees value that is there
    adopt_useless: float = 0.2  #: P(adopt | not useful): the agent is fooled
    freeform: float = 0.1  #: P(a decision line is written in a free-text form the parser rejects)
    attention: int = 4  #: at most this many items and rules applied in one kernel (the context is not free)
    lessons: int = 2  #: at most this many lessons per distillation reply (and at most what is asked)
    slow: int = 16  #: the first correct kernel does the expert's work this many times (1: no speed model)
    speed_base: float = 0.2  #: P(an optimisation round finds the faster kernel) with nothing useful adopted
    distraction: float = 0.1  #: share of P(success) lost per 1,000 tokens of unhelpful memory text shown
    rule_lines: int = 10  #: at most this many code lines in a resident rule it writes (abstract_rule.j2: 10)

    _PROBABILITIES = ("base", "level_drop", "spread", "gain", "harm", "useful_home", "useful_general",
                      "useful_other", "adopt_useful", "adopt_useless", "freeform", "speed_base",
                      "distraction")

    def __post_init__(self) -> None:
        for name in self._PROBABILITIES:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise OracleConfigError(f"oracle setting {name}={value} is outside [0, 1]")
        if self.seed < 0 or self.lessons < 0 or self.rule_lines < 0:
            raise OracleConfigError("oracle settings seed, lessons and rule_lines must be >= 0")
        if self.attention < 1:
            raise OracleConfigError(f"oracle setting attention={self.attention} must be >= 1")
        if not 1 <= self.slow <= 64:
            raise OracleConfigError(f"oracle setting slow={self.slow} must be in [1, 64]")

    @classmethod
    def parse(cls, text: str) -> OracleConfig:
        """`seed=3,base=0.2` (empty: the defaults); one-line errors name the bad part."""
        known = {f.name: f for f in fields(cls) if not f.name.startswith("_")}
        values: dict[str, int | float] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, eq, raw = part.partition("=")
            key = key.strip()
            if not eq or key not in known:
                raise OracleConfigError(f"oracle setting {part!r} is not key=value with a key among "
                                        f"{', '.join(known)}")
            if key in values:
                raise OracleConfigError(f"oracle setting {key!r} is given twice")
            try:
                values[key] = int(raw) if known[key].type in (int, "int") else float(raw)
            except ValueError:
                raise OracleConfigError(f"oracle setting {key}={raw!r} is not a number") from None
            if values[key] != values[key] or values[key] in (float("inf"), float("-inf")):
                raise OracleConfigError(f"oracle setting {key}={raw!r} is not a finite number")
        return cls(**values)  # type: ignore[arg-type]


def draw(seed: int, *about: object) -> float:
    """A uniform number in [0, 1) that is a pure function of the seed and `about`."""
    digest = hashlib.sha256(json.dumps([seed, *map(str, about)]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


#: The seed memory's categories (targets/cpu/seed_memory.jsonl) as task categories.
_SEED_CATEGORY = {"indexing": "index", "fusion": "fused", "cast": "math", "elementwise": "math",
                  "matmul": "fused"}
#: A distilled lesson's home category, as this generator writes it into the title.
LESSON_HOME = re.compile(r"\bin (?P<category>[a-z_]+) kernels\b")


@lru_cache(maxsize=1)
def seed_categories() -> dict[str, str]:
    """Seed item title -> its home category ("general" for General items)."""
    path = Path(__file__).resolve().parent.parent / "targets" / "cpu" / "seed_memory.jsonl"
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            category = str(row.get("category", "general")).strip().lower()
            out[str(row["title"]).strip()] = _SEED_CATEGORY.get(category, category)
    return out


def home_category(title: str) -> str | None:
    """The category an item was made for: a seed item's own, a lesson's from its title (None: unknown)."""
    seeded = seed_categories().get(title.strip())
    if seeded is not None:
        return seeded
    match = LESSON_HOME.search(title)
    return match.group("category") if match else None


#: The two things an item can truly help with: a correct kernel (a correctness round) and a faster
#: one (an optimisation round). They are drawn independently, at the same rates.
GOALS = ("correct", "faster")


def useful(config: OracleConfig, title: str, category: str, goal: str = "correct") -> bool:
    """The hidden truth: does the item titled `title` help operators of `category` reach `goal`
    (GOALS: a correct kernel, or a faster correct one)?"""
    home = home_category(title)
    if home == "general":
        p = config.useful_general
    elif home == category:
        p = config.useful_home
    else:
        p = config.useful_other
    # "useful" is the correctness draw's key since the first worlds, so they are unchanged
    key = "useful" if goal == "correct" else f"useful-{goal}"
    return draw(config.seed, key, title.strip(), category) < p


def retained(config: OracleConfig, padding_tokens: int) -> float:
    """The share of a round's chance left after reading `padding_tokens` of memory text that does
    not help its goal: (1 - distraction) per 1,000 tokens, geometric. Reasoning degrades with input
    length long before a model's context limit: over the models Levy, Jacoby and Goldberg tested
    (ACL 2024, arXiv 2402.14848), accuracy fell from 0.92 to 0.68 when ~2,750 tokens of irrelevant
    padding were added, 0.896 per 1,000 tokens; `distraction` = 0.1 is that rate. This is the cost
    the method's resident priority divides by (spec §6.2: U = u * p / L, L the context cost)."""
    return (1.0 - config.distraction) ** (max(0, padding_tokens) / 1000.0)


def success_probability(config: OracleConfig, operator: str, level: int, n_useful: int,
                        n_useless: int, padding_tokens: int = 0) -> float:
    """P(the round's kernel is correct): the operator's difficulty, then what was adopted, then
    what the memory text that does not help cost (`retained`)."""
    difficulty = config.spread * (draw(config.seed, "difficulty", operator) - 0.5)
    p = (config.base - config.level_drop * max(0, level - 1) + difficulty
         + config.gain * n_useful - config.harm * n_useless)
    return min(0.98, max(0.02, p * retained(config, padding_tokens)))


def faster_probability(config: OracleConfig, n_useful: int, n_useless: int, padding_tokens: int = 0) -> float:
    """P(an optimisation round writes the faster kernel): `speed_base`, then what was adopted
    (the same `gain` and `harm` per item as a correctness round) and the same `retained` share."""
    p = config.speed_base + config.gain * n_useful - config.harm * n_useless
    return min(0.98, max(0.02, p * retained(config, padding_tokens)))


# -- reading the prompts the real templates render (agent/prompt.py, prompts/*.j2) ----------------

_OPERATOR = re.compile(r"^# Operator: (?P<name>\S+) \(level (?P<level>\d+), (?P<category>[^)]+)\)$",
                       re.MULTILINE)
_ITEM = re.compile(r"^\[E(?P<id>\d+)\] (?P<title>.*) \(type: [\w-]+\)$", re.MULTILINE)
_RULE = re.compile(r"^\[R(?P<id>\d+)\] (?P<text>.*)$", re.MULTILINE)
_ROUND = re.compile(r"^## Your goal in this round \(round (?P<round>\d+) of \d+", re.MULTILINE)
_DISTILL_OPERATOR = re.compile(r'the operator "(?P<name>[^"]+)" \((?P<category>[^)]+)\)')
_DISTILL_MAX = re.compile(r"Write at most (?P<n>\d+) lessons")
_DISTILL_TYPES = re.compile(r"^type: <one of: (?P<types>[^>]+)>$", re.MULTILINE)
_RULE_TITLE = re.compile(r"^Title: (?P<title>.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Shown:
    """A retrieved item or resident rule as the prompt shows it: the id it decides, its title."""

    ref: str  # "E12" / "R3"
    title: str
    tokens: int = 0  # the length of its text in the prompt (models.backend.estimate_tokens)


@dataclass(frozen=True)
class RoundPrompt:
    """What a round's prompt says, read from the rendered text."""

    operator: str
    level: int
    category: str
    round: int
    optimising: bool
    shown: tuple[Shown, ...]


def operator_of(system: str) -> tuple[str, int, str] | None:
    """(name, level, category) from the system message's operator heading (the last one)."""
    found = list(_OPERATOR.finditer(system))
    if not found:
        return None
    last = found[-1]
    return last.group("name"), int(last.group("level")), last.group("category").strip()


def read_round(system: str, user: str) -> RoundPrompt | None:
    """A round prompt's operator, round and shown ids (None: not a round prompt)."""
    op, rnd = operator_of(system), _ROUND.search(user)
    if op is None or rnd is None:
        return None
    length = shown_tokens(user)
    shown = [Shown(f"E{m.group('id')}", m.group("title").strip(), length.get(f"E{m.group('id')}", 0))
             for m in _ITEM.finditer(user)]
    shown += [Shown(f"R{m.group('id')}", rule_title(m.group("text")), length.get(f"R{m.group('id')}", 0))
              for m in _RULE.finditer(user)]
    return RoundPrompt(op[0], op[1], op[2], int(rnd.group("round")), "Make it FASTER" in user, tuple(shown))


_MEMORY_HEADING = re.compile(r"^## (Resident rules|Retrieved experiences)\b", re.MULTILINE)
_SHOWN_START = re.compile(r"^\[(?P<ref>[ER]\d+)\] ", re.MULTILINE)


def shown_tokens(user: str) -> dict[str, int]:
    """Each shown item's or rule's length in tokens: its text in the prompt's memory sections
    (round.j2: from its `[E<id>]` / `[R<id>]` line to the next one or the next heading)."""
    out: dict[str, int] = {}
    for heading in _MEMORY_HEADING.finditer(user):
        end = user.find("\n## ", heading.end())
        section = user[heading.end(): end if end >= 0 else len(user)]
        starts = list(_SHOWN_START.finditer(section))
        for start, following in zip(starts, [*starts[1:], None], strict=True):
            text = section[start.start(): following.start() if following else len(section)]
            out[start.group("ref")] = estimate_tokens(text.strip())
    return out


def rule_title(first_line: str) -> str:
    """The item title a resident rule stands for: this generator writes a rule as the title and a
    full stop, and the memory's fallback rule starts the same way."""
    return first_line.strip().rstrip(".").strip()


def read_distill(user: str) -> tuple[str, str, int, list[str]] | None:
    """(operator, category, max lessons, allowed types) of a distillation prompt."""
    op, most, types = _DISTILL_OPERATOR.search(user), _DISTILL_MAX.search(user), _DISTILL_TYPES.search(user)
    if op is None or most is None or types is None:
        return None
    return (op.group("name"), op.group("category").strip(), int(most.group("n")),
            [t.strip() for t in types.group("types").split(",") if t.strip()])


def read_rule_title(user: str) -> str | None:
    """The title of the item a rule-abstraction prompt (abstract_rule.j2) shows."""
    match = _RULE_TITLE.search(user)
    return match.group("title").strip() if match else None


def truly_useful_share(config: OracleConfig, title: str, categories: list[str]) -> float:
    """The share of a stream's operators (given by their categories, one entry per operator) that
    the item titled `title` truly helps, averaged over the two goals (GOALS; a world with no speed
    model, slow = 1, has only the first): how a resident rule, shown to every operator, is judged."""
    if not categories:
        return 0.0
    goals = GOALS if config.slow > 1 else GOALS[:1]
    return (sum(useful(config, title, c, g) for c in categories for g in goals)
            / (len(categories) * len(goals)))
