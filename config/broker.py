"""The embedded Celery broker: kombu's filesystem transport, with messages published atomically.

kombu's own ``filesystem`` channel creates a message file under its final name, then locks and
writes it; a consumer does not take that lock, it moves the file away and reads it. A consumer
polling in between reads an empty message and the worker dies (``JSONDecodeError: Expecting
value``, celery/kombu#1551; seen here when a burst of outbox replay tasks met a polling worker).
This channel writes each message under a hidden temporary name in the same folder and renames it
into place (atomic on POSIX), so a consumer sees a message whole or not at all.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        final = os.path.join(self.data_folder_out, f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg")
        # A leading dot: the name's part after the first dot is never "<queue>.msg", so no
        # consumer, size or purge of any queue counts the file before the rename.
        temporary = os.path.join(self.data_folder_out, f".{uuid.uuid4()}.writing")
        try:
            with open(temporary, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(temporary, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
