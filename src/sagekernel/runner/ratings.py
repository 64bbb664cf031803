"""Ratings of adopted records (migration 0004, `sage audit adoptions`), stored by RunStore.

A rating is a person's judgement of one ADOPTED decision: did the revision that followed it use
the item fully, partly, or not at all? Re-rating a record by the same rater replaces the rating.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from pathlib import Path

from sagekernel import db
from sagekernel.errors import SageError
from sagekernel.runner.store import RunStore, now_iso

RATINGS = ("full", "partial", "unrelated")
_ID = re.compile(r"^(?P<op>.+)/(?P<round>\d+)/E(?P<item>\d+)$")


class RatingError(SageError):
    """A rating that names no sampled record or no known grade."""


def parse_rating(text: str) -> tuple[str, str]:
    """`OPERATOR/ROUND/E<item>=full` -> (record id, rating); a rating may be abbreviated (f/p/u)."""
    record, sep, value = text.strip().rpartition("=")
    grade = next((r for r in RATINGS if value.strip().lower() and r.startswith(value.strip().lower())), None)
    if not sep or not _ID.match(record.strip()) or grade is None:
        raise RatingError(f"a rating is ID=full|partial|unrelated with ID like e2e_add/2/E3, not {text!r}")
    return record.strip(), grade


def read_ratings_file(path: Path, text: str | None = None) -> dict[str, str]:
    """Lines `ID=rating` (blank lines and # comments ignored) of the file `path` (or its `text`)."""
    try:
        lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise RatingError(f"cannot read the ratings file {path}: {why}") from exc
    try:
        pairs = [parse_rating(line) for line in lines if line.strip() and not line.lstrip().startswith("#")]
    except RatingError as exc:
        raise RatingError(f"the ratings file {path}: {exc}") from None
    return dict(pairs)


def save_ratings(conn: sqlite3.Connection, run_id: str, ratings: Mapping[str, str],
                 auto: Mapping[str, bool], rater: str = "") -> int:
    """Store ratings (record id -> rating) in one transaction; returns how many were stored."""
    rows = []
    for record, rating in ratings.items():
        match = _ID.match(record)
        if match is None or rating not in RATINGS:
            raise RatingError(f"bad rating {record}={rating}")
        rows.append((run_id, match["op"], int(match["round"]), int(match["item"]), rating, rater,
                     None if record not in auto else int(auto[record]), now_iso()))
    RunStore(conn).save_ratings(rows)
    return len(rows)


def load_ratings(conn: sqlite3.Connection, run_id: str, rater: str | None = None) -> dict[str, str]:
    """Record id -> rating (the newest one when several raters rated it and `rater` is None)."""
    if "adoption_ratings" not in db.tables(conn):
        return {}
    return {f"{op}/{rnd}/E{item}": rating for op, rnd, item, rating in RunStore(conn).ratings(run_id, rater)}
