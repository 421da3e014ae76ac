"""The database's own refusal to change or delete audit events: a trigger on the audit table
(PostgreSQL and SQLite) that rejects every UPDATE and DELETE, whoever issues it through the
application's connection. Created by migration 0006 and again after every ``migrate``: SQLite
rebuilds a table a migration alters, and the rebuilt table has no triggers.
"""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper

TABLE = "tenants_auditevent"
MESSAGE = "audit events are append-only"

_POSTGRESQL_CREATE = [
    f"""CREATE OR REPLACE FUNCTION {TABLE}_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE = '{MESSAGE}: ' || TG_OP || ' refused';
END $$""",
    f"CREATE OR REPLACE TRIGGER {TABLE}_append_only BEFORE UPDATE OR DELETE ON {TABLE} "
    f"FOR EACH ROW EXECUTE FUNCTION {TABLE}_refuse()",
]
_POSTGRESQL_DROP = [f"DROP TRIGGER IF EXISTS {TABLE}_append_only ON {TABLE}", f"DROP FUNCTION IF EXISTS {TABLE}_refuse()"]
SQLITE_CREATE = [
    f"CREATE TRIGGER IF NOT EXISTS {TABLE}_no_{op.lower()} BEFORE {op} ON {TABLE} "
    f"BEGIN SELECT RAISE(ABORT, '{MESSAGE}: {op} refused'); END"
    for op in ("UPDATE", "DELETE")
]
SQLITE_DROP = [f"DROP TRIGGER IF EXISTS {TABLE}_no_{op}" for op in ("update", "delete")]

_STATEMENTS = {"postgresql": (_POSTGRESQL_CREATE, _POSTGRESQL_DROP), "sqlite": (SQLITE_CREATE, SQLITE_DROP)}


def statements(vendor: str, *, create: bool = True) -> list[str]:
    """The SQL that creates (or drops) the triggers; [] for a database without them."""
    pair = _STATEMENTS.get(vendor)
    return (pair[0] if create else pair[1]) if pair else []


def triggers_ensure(connection: BaseDatabaseWrapper) -> None:
    """Create the triggers if the audit table exists and lacks them (idempotent)."""
    if TABLE not in connection.introspection.table_names():
        return
    with connection.cursor() as cursor:
        for sql in statements(connection.vendor):
            cursor.execute(sql)


def triggers_present(connection: BaseDatabaseWrapper) -> bool:
    """Whether the database refuses UPDATE and DELETE of audit events right now."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal "
                           "AND tgenabled <> 'D' AND tgname = %s", [TABLE, f"{TABLE}_append_only"])
            return cursor.fetchone()[0] == 1
        if connection.vendor == "sqlite":
            cursor.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s "
                           "AND name IN (%s, %s)", [TABLE, f"{TABLE}_no_update", f"{TABLE}_no_delete"])
            return cursor.fetchone()[0] == 2
    return False
