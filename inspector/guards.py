"""The one mechanism every inspector view goes through.

A view is declared with ``staff_view``, ``tenant_view`` or ``subject_view``: the decorator logs the
staff user in, resolves the tenant or end-user for the permission the view needs (404 not yours,
403 not your role: ``inspector.access``), marks the response ``Cache-Control: no-store``, and, for
a view declared with ``reads``, records the ``staff.viewed`` audit event of a response that
carried memory. ``tests/inspector/test_staff_access.py`` walks every URL pattern and fails for a
view that is not declared, or that shows memory without the event.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers

from tenants.models import Subject
from tenants.services.audit import audit_record

from . import access


def shown(request: HttpRequest, **details) -> None:
    """What the response showed, for its ``staff.viewed`` event (counts and ids, never content)."""
    request.staff_read_details = {**getattr(request, "staff_read_details", {}), **details}


def shown_nothing(request: HttpRequest) -> None:
    """This response carries no memory (an empty form, a failed read): no ``staff.viewed`` event."""
    request.staff_read_nothing = True


def _guarded(view: Callable, *, reads: str | None, resolve: Callable) -> Callable:
    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        target, kwargs = resolve(request, kwargs)
        response = view(request, target, *args, **kwargs) if target is not None else view(request, *args, **kwargs)
        if reads and isinstance(target, Subject) and 200 <= response.status_code < 300:
            _record(request, target, reads, kwargs)
        add_never_cache_headers(response)
        return response

    wrapper.staff_reads = reads  # declared: the coverage test reads it
    return wrapper


def _record(request: HttpRequest, subject: Subject, reads: str, kwargs: dict) -> None:
    if getattr(request, "staff_read_nothing", False):
        return
    details = {"view": reads, **{k: str(v)[:64] for k, v in kwargs.items() if not isinstance(v, uuid.UUID)},
               **getattr(request, "staff_read_details", {})}
    audit_record(actor=request.user, action="staff.viewed", subject=subject, target_id=str(subject.user_id),
                 details=details)


def staff_view(*, reads: None = None) -> Callable:
    """A view of no one tenant (the home page): logged in, no-store."""
    return lambda view: _guarded(view, reads=reads, resolve=lambda request, kwargs: (None, kwargs))


def tenant_view(permission: str, *, reads: None = None) -> Callable:
    """A view of the tenant ``slug``: called as ``view(request, tenant, ...)`` once ``permission``
    is held there. Tenant pages show no end-user's memory (``reads`` is for end-user views)."""
    def resolve(request, kwargs):
        kwargs = dict(kwargs)
        return access.tenant_for(request.user, kwargs.pop("slug"), permission), kwargs

    return lambda view: _guarded(view, reads=reads, resolve=resolve)


def subject_view(permission: str, *, reads: str | None) -> Callable:
    """A view of the end-user ``user_id``: called as ``view(request, subject, ...)`` once
    ``permission`` is held in its tenant. ``reads`` names what it shows of their memory (None: it
    shows none); each response that shows it is a ``staff.viewed`` event (the live feed's too:
    one per batch of new episodes it shows, naming their ids)."""
    def resolve(request, kwargs):
        kwargs = dict(kwargs)
        return access.subject_for(request.user, kwargs.pop("user_id"), permission), kwargs

    return lambda view: _guarded(view, reads=reads, resolve=resolve)
