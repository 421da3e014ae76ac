"""Subject writes that survive an Elasticsearch outage: durability, nothing else.

``write_submit`` applies a checked write (``memory_app.commands``) at once or, when
Elasticsearch is unreachable (or the subject has writes queued), accepts it into the outbox,
committed before the caller is answered; ``outbox_replay`` applies queued writes in order, once
each. Modules: ``submit``, ``dispatch``, ``replay``, ``lease``, ``failures``, ``selectors``; what
counts as an outage is ``engram_core.es.outage``'s, re-exported here."""

from engram_core.es.outage import is_outage, outage_error
from memory_app.outbox.replay import ReplayReport, outbox_replay
from memory_app.outbox.selectors import operation_get, outbox_backlog, subject_outbox
from memory_app.outbox.submit import Submitted, write_submit

__all__ = [
    "ReplayReport",
    "Submitted",
    "is_outage",
    "operation_get",
    "outage_error",
    "outbox_backlog",
    "outbox_replay",
    "subject_outbox",
    "write_submit",
]
