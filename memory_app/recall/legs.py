"""The legs of a recall's search, as values search and rank share: what a leg searches with
(``LegKind``), what for (``LegRole``) and, for an entity's legs, which entity (``LegId``). Rank
reads these fields; a leg's ``name`` is only how explain shows it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class LegKind(StrEnum):
    BM25 = "bm25"  # lexical: the question's words
    DENSE = "dense"  # kNN over the memories' vectors
    MENTIONS = "mentions"  # a count of the memories naming an entity, not ranked (``entity_guard``)


class LegRole(StrEnum):
    PLAIN = "plain"  # the question over the types a recall returns
    CREDIT = "credit"  # the same over the crediting types, only for the credit their hits give
    ENTITY = "entity"  # the question's topic among the memories naming one of its entities
    DATED = "dated"  # the question among the episodes dated in the period it names
    HOP = "hop"  # the first hits' own vectors among the episodes of other sessions (``search.hop_leg``)


@dataclass(frozen=True)
class LegId:
    """One leg: its ``kind`` and ``role`` and, for an entity leg, the entity's place among the
    question's entities (``entity``, from 1)."""

    kind: LegKind
    role: LegRole = LegRole.PLAIN
    entity: int | None = None

    @property
    def dense(self) -> bool:
        return self.kind is LegKind.DENSE

    @property
    def shadows(self) -> LegId:
        """The leg whose scale this one is valued on: a crediting leg, the plain leg of its kind
        (so that a fact and its episode compare); any other, itself."""
        return LegId(self.kind) if self.role is LegRole.CREDIT else self

    @property
    def name(self) -> str:
        """How explain names the leg: "bm25", "dense", "credit_bm25", "credit_dense", "entityN",
        "entityN_dense", "entityN_mentions", "dated", "dated_dense", "hop_dense"."""
        if self.role is LegRole.ENTITY:
            return f"entity{self.entity}" + ("" if self.kind is LegKind.BM25 else f"_{self.kind}")
        if self.role is LegRole.HOP:
            return f"hop_{self.kind}"
        if self.role is LegRole.DATED:
            return "dated" + ("" if self.kind is LegKind.BM25 else f"_{self.kind}")
        return f"credit_{self.kind}" if self.role is LegRole.CREDIT else str(self.kind)


PLAIN_BM25, PLAIN_DENSE = LegId(LegKind.BM25), LegId(LegKind.DENSE)
HOP_DENSE = LegId(LegKind.DENSE, LegRole.HOP)


def entity_leg(kind: LegKind, entity: int) -> LegId:
    """The ``kind`` leg of the question's ``entity``-th entity (from 1)."""
    return LegId(kind, LegRole.ENTITY, entity)
