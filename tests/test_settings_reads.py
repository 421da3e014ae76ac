"""Settings are read at the edge: below it (memory_app's domain, engram_core, tenants) a module reads
``settings.X`` only in an options constructor (a function named ``from_settings``, called at the
entry of a request, task or command and passed down), or where ALLOWED says why it still does."""

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parent.parent
BELOW_THE_EDGE = ("memory_app", "engram_core", "tenants")
# Entries and Django's own wiring: they are the edge (or run outside any request).
EDGE = ("memory_app/management/", "memory_app/migrations/", "memory_app/tasks.py", "memory_app/views.py",
        "memory_app/admin.py", "memory_app/apps.py", "memory_app/checks.py", "tenants/management/",
        "tenants/migrations/", "tenants/admin.py", "tenants/apps.py")

# (module, function): why it still reads a setting where it runs.
ALLOWED = {
    # Process wiring: one client, key ring, pool, thread or deployment-wide switch per process, built or read
    # lazily on first use.
    ("engram_core/es/client.py", "base_client"): "the one cached Elasticsearch client (URL, TLS, timeouts)",
    ("engram_core/es/client.py", "admin_client"): "a cached client per credential",
    ("engram_core/es/client.py", "keys_client"): "a cached client per credential",
    ("engram_core/es/client.py", "monitor_client"): "a cached client per credential",
    ("engram_core/es/client.py", "audit_client"): "a cached client per credential",
    ("engram_core/es/client.py", "request_timeout"): ("the clients' request timeout, fixed with the base client; "
                                                     "freshness waits for another's refresh no longer"),
    ("engram_core/es/capabilities.py", "probe_capabilities"): "the cluster's capabilities, probed once and cached",
    ("engram_core/es/prefixes.py", "shared_prefix"): "the deployment's index prefix (every index name)",
    ("engram_core/es/schema.py", "audit_checkpoints_index"): "the deployment's index prefix",
    ("engram_core/es/schema.py", "audit_checkpoints_ensure"): "replicas of an index made once, at setup",
    ("tenants/crypto.py", "_configured"): "the encryption key ring, cached per process",
    ("tenants/crypto.py", "audit_keyring"): "the audit key ring, cached per process",
    ("tenants/crypto.py", "audit_signing_keys"): "the audit signing keys, cached per process",
    ("tenants/crypto.py", "audit_public_keys"): "the audit public keys, cached per process",
    ("tenants/services/audit.py", "checkpoint_spacing"): ("one checkpoint spacing for the whole audit log (whichever "
                                                          "of ~30 callers appends), read once as its key ring is"),
    ("tenants/services/guard.py", "_options"): ("the guard's probe lifetime and insecure switch, read once: a "
                                                "parameter would let a caller turn isolation off for itself"),
    ("tenants/es_keys.py", "_separate_keys_credential"): "which credential mints keys (deployment wiring)",
    ("tenants/models.py", "<module>"): "AUTH_USER_MODEL: Django's way to name the user model",
    ("memory_app/providers.py", "_setting"): "the embedder and WordNet, built once per process and cached",
    ("memory_app/providers.py", "wordnet"): "WordNet, loaded once per process",
    ("memory_app/providers.py", "concept_options"): "the concept reader's options, built once with WordNet",
    ("memory_app/providers.py", "wordnet_warm_up"): "a worker's warm-up at start",
    ("memory_app/observability.py", "monitor_authorized"): "the /metrics token, checked by the view that calls it",
    ("memory_app/observability.py", "worker_metrics_start"): "a worker's exporter, started once",
    ("memory_app/observability.py", "tracing_start"): "tracing, started once per process",
    ("memory_app/health.py", "broker_status"): "the broker's URL (deployment wiring), for /healthz",
    ("memory_app/metering.py", "_flush_forever"): "the usage flusher's interval: one thread per process",
    ("memory_app/turns.py", "_recall_start"): "the size of the process's turn-recall pool, built once",
    ("memory_app/recall/options.py", "ranking_config"): "RankingConfig's builder, called at recall's entry",
}


def settings_reads(source: str) -> set[str]:
    """The functions (``<module>`` at the top level) of ``source`` that read a Django setting, other
    than the options constructors (``from_settings``)."""
    found: set[str] = set()

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            reads = (isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name)
                     and child.value.id == "settings")
            reads |= (isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "getattr"
                      and bool(child.args) and isinstance(child.args[0], ast.Name) and child.args[0].id == "settings")
            if reads and inner != "from_settings":
                found.add(inner)
            visit(child, inner)

    visit(ast.parse(source), "<module>")
    return found


def _below_the_edge() -> dict[tuple[str, str], None]:
    reads: dict[tuple[str, str], None] = {}
    for package in BELOW_THE_EDGE:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            if not module.startswith(EDGE):
                reads.update(dict.fromkeys((module, f) for f in settings_reads(path.read_text())))
    return reads


def test_below_the_edge_settings_are_read_only_by_options_constructors_or_where_allowed():
    unexplained = sorted(set(_below_the_edge()) - set(ALLOWED))
    assert not unexplained, (f"settings read below the edge: {unexplained}; read them at the entry into an "
                             "options value (from_settings) and pass it in, or say in ALLOWED why not")


def test_the_allow_list_names_only_reads_that_are_there():
    stale = sorted(set(ALLOWED) - set(_below_the_edge()))
    assert not stale, f"ALLOWED names reads that are gone: {stale}"


def test_the_scan_finds_a_read_and_spares_an_options_constructor():
    source = ("def f():\n    return settings.A\n"
              "class O:\n    @classmethod\n    def from_settings(cls):\n        return cls(settings.B)\n"
              "X = getattr(settings, 'C')\n")
    assert settings_reads(source) == {"f", "<module>"}
