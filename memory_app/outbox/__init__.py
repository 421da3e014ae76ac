"""Subject writes that survive an Elasticsearch outage.

``write_submit`` applies a write at once or, when Elasticsearch is unreachable (or earlier
writes of the same subject are still queued), accepts it into the outbox: a database row,
committed before the caller is answered, that carries the id the memory will get.
``outbox_replay`` (Celery: ``memory_app.tasks.replay_outbox``) applies queued writes in order,
one replayer at a time, idempotently: a create whose id already exists is done, a forget of a
memory already gone is done, an import skips the episodes already stored.

Guarantees: an accepted write is applied once, after every write of the same subject accepted
before it. One that turns out to be invalid at replay (e.g. it supersedes a memory that does
not exist) is marked failed with its error; any other failure is retried, never given up. A
playbook outcome is stamped with an operation id when accepted, and the playbook keeps the ids
of its last outcomes, so one whose update reached Elasticsearch but whose answer was lost to the
outage is recognised on replay and not counted again.

One job per module:
- ``outage``: what counts as an outage, and the one error that reports it;
- ``submit``: validate, stamp, then apply now or accept into the outbox (``write_submit``);
- ``turn``: a user turn: its write plus the recall on its text (``turn_submit``);
- ``dispatch``: run one write through its service (shared by submit and replay);
- ``replay``: apply queued entries in order, and the state each entry ends in;
- ``lease``: one replayer at a time (a database lease);
- ``selectors``: reads of the outbox (pending, one operation, the /healthz backlog).
"""

from memory_app.outbox.outage import is_outage, outage_error
from memory_app.outbox.replay import ReplayReport, outbox_replay
from memory_app.outbox.selectors import operation_get, outbox_backlog, outbox_has_pending
from memory_app.outbox.submit import Submitted, write_submit
from memory_app.outbox.turn import TurnResult, turn_submit

__all__ = [
    "ReplayReport",
    "Submitted",
    "TurnResult",
    "is_outage",
    "operation_get",
    "outage_error",
    "outbox_backlog",
    "outbox_has_pending",
    "outbox_replay",
    "turn_submit",
    "write_submit",
]
