"""A derived memory kept by a cascade: its support without the forgotten episodes, and flagged for
review when it keeps some (one Elasticsearch update, as read through the subject's key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import timezone

from engram_core.errors import Conflict, NotFound
from memory_app import selectors
from memory_app.services.forget.forgetting import Forgetting
from memory_app.services.store import document_update, subject_writes
from tenants.selectors import SubjectGone


def support_trim(forgetting: Forgetting, *, keep: Callable[[str], bool], flag: bool) -> None:
    """Keep only the supporting episodes ``keep`` accepts in a derived memory's support; with
    ``flag``, flag it for review too. Nothing when it was forgotten meanwhile."""
    subject, visible = forgetting.subject, forgetting.visible

    def trim(current: selectors.Visible) -> dict[str, Any] | None:
        support = current.source.get("supporting_episode_ids") or []
        kept = [i for i in support if keep(i)]
        if kept == support:
            return None
        update: dict[str, Any] = {"supporting_episode_ids": kept or None}
        if flag:
            metadata = current.source.get("metadata") or {}
            found = metadata.get("review")
            review: dict[str, Any] = found if isinstance(found, dict) else {}
            update["metadata"] = {**metadata, "review": {
                "reason": "supporting_episodes_forgotten", "flagged_at": timezone.now().isoformat(),
                "episodes_forgotten": int(review.get("episodes_forgotten") or 0) + len(support) - len(kept)}}
        return update

    try:
        with subject_writes(subject=subject) as target:
            document_update(writer=target.writer, visible=visible, change=trim, refresh=True,
                            read=lambda: selectors.visible_document(subject=subject, memory_id=visible.id,
                                                                    types=[visible.memory_type]),
                            conflict=Conflict("a derived memory keeps changing; retry the forget",
                                              details={"id": visible.id}, code="concurrent_update"))
    except SubjectGone:
        raise
    except NotFound:
        pass  # forgotten meanwhile
