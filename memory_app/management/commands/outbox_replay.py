from django.core.management.base import BaseCommand

from memory_app.outbox import outbox_backlog, outbox_replay


class Command(BaseCommand):
    help = ("Apply the writes waiting in the outbox now (what the periodic Celery task does), "
            "then print what is left. Safe to run at any time: one replayer runs at a time.")

    def handle(self, *args, **options):
        report = outbox_replay()
        if report.skipped:
            self.stdout.write("another replay is running; nothing done")
        else:
            self.stdout.write(f"applied {report.applied}, failed {report.failed}, pending {report.pending}"
                              + (" (stopped: Elasticsearch unavailable)" if report.stopped_by_outage else ""))
        self.stdout.write(f"backlog: {outbox_backlog()}")
