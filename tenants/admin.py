"""Django admin for tenants, scoped by staff role as the inspector's role matrix is.

Superusers see and do everything. Other staff see only tenants where they hold a Membership:
``tenant_admin`` views and acts (end-users, keys, tokens) in their tenants; ``compliance``
views everything of their tenants read-only, and alone reads the audit log; ``support`` views
end-users only. Staff without a membership see nothing; a list's tenant filter offers only the
tenants the list holds. Secrets are never displayed; every key/token action goes through
tenants.services, which audits it with the staff user as actor.
"""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.admin.options import get_content_type_for_model
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.cache import add_never_cache_headers

from engram_core.errors import EngramError

from .models import AgentToken, AuditEvent, Membership, Subject, SubjectKey, Tenant
from .selectors import staff_tenant_ids
from .services.audit import audit_record
from .services.isolation_move import tenant_indices_ensure
from .services.keys import KeyLifetimes, subject_key_ensure, subject_key_revoke, subject_key_rotate
from .services.tokens import agent_token_create, agent_token_revoke

ALL_ROLES = tuple(Membership.Role.values)
ADMIN = (Membership.Role.TENANT_ADMIN,)
OVERSIGHT = (Membership.Role.TENANT_ADMIN, Membership.Role.COMPLIANCE)
COMPLIANCE = (Membership.Role.COMPLIANCE,)
# A tenant filter lists the tenants of the rows the user may see, never every tenant's name.
TENANT_FILTER = ("tenant", admin.RelatedOnlyFieldListFilter)


def admin_log_name(obj: Model) -> str:
    """How the Django admin's log names an object: its type and primary key, never its own name
    (an end-user's is their external id, which must not outlive their erase there)."""
    return f"{obj._meta.verbose_name} {obj.pk}"


def _admin_log(request: HttpRequest, obj: Model, flag: int, message: str | list = "") -> LogEntry:
    return LogEntry.objects.create(
        user_id=request.user.pk, content_type_id=get_content_type_for_model(obj).pk, object_id=str(obj.pk),
        object_repr=admin_log_name(obj)[:200], action_flag=flag,
        change_message=json.dumps(message) if isinstance(message, list) else message)


class TenantScopedAdmin(admin.ModelAdmin):
    """Permissions from Memberships rather than Django model permissions; a log holding no names."""

    def log_addition(self, request, obj, message):
        return _admin_log(request, obj, ADDITION, message)

    def log_change(self, request, obj, message):
        return _admin_log(request, obj, CHANGE, message)

    def log_deletions(self, request, queryset):
        return [_admin_log(request, obj, DELETION) for obj in queryset]

    tenant_path = "tenant"  # lookup from the model to its Tenant
    view_roles: tuple[str, ...] = ALL_ROLES
    act_roles: tuple[str, ...] = ()  # may add, and run this model's actions
    editable = False  # change form is editable (for superusers and act_roles)

    def _tenant_ids(self, request: HttpRequest, roles: tuple[str, ...]) -> set[int] | None:
        """Tenant ids ``request.user`` holds one of ``roles`` in; None means all (superuser)."""
        if request.user.is_active and request.user.is_superuser:
            return None
        if not roles:
            return set()
        return staff_tenant_ids(user=request.user, roles=roles)

    def _tenant_id_of(self, obj: Model) -> int | None:
        if not self.tenant_path:
            return obj.pk
        *parents, last = self.tenant_path.split("__")
        for name in parents:
            obj = getattr(obj, name)
        return getattr(obj, f"{last}_id")

    def _allowed(self, request: HttpRequest, roles: tuple[str, ...], obj: Model | None = None) -> bool:
        ids = self._tenant_ids(request, roles)
        if ids is None:
            return True
        return bool(ids) if obj is None else self._tenant_id_of(obj) in ids

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        ids = self._tenant_ids(request, self.view_roles)
        if ids is None:
            return queryset
        return queryset.filter(**{f"{self.tenant_path or 'pk'}__in": ids})

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request, self.view_roles)

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._allowed(request, self.view_roles, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.editable and self._allowed(request, self.act_roles)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.editable and self._allowed(request, self.act_roles, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_act_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request, self.act_roles)

    def actionable(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        """The part of ``queryset`` the user may act on (compliance may see rows it cannot touch)."""
        ids = self._tenant_ids(request, self.act_roles)
        if ids is None:
            return queryset
        allowed = queryset.filter(**{f"{self.tenant_path or 'pk'}__in": ids})
        skipped = queryset.count() - allowed.count()
        if skipped:
            self.message_user(request, f"{skipped} selected item(s) skipped: not in a tenant you administer",
                              messages.WARNING)
        return allowed

    def limit_tenant_choices(self, request: HttpRequest, formfield):
        ids = self._tenant_ids(request, self.act_roles)
        if ids is not None and formfield is not None:
            formfield.queryset = formfield.queryset.filter(pk__in=ids)
        return formfield

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        formfield = super().formfield_for_foreignkey(db_field, request, **kwargs)
        return self.limit_tenant_choices(request, formfield) if db_field.name == "tenant" else formfield

    def _run(self, request: HttpRequest, queryset: QuerySet, verb: str, fn) -> None:
        done = 0
        for obj in self.actionable(request, queryset):
            try:
                fn(obj)
            except EngramError as exc:  # reported to the user; the other selected items still get their turn
                self.message_user(request, f"{obj}: {exc.message}", messages.ERROR)
            else:
                done += 1
        if done:
            self.message_user(request, f"{verb} {done} item(s)", messages.SUCCESS)


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdmin):
    tenant_path = ""
    list_display = ("slug", "name", "isolation", "created_at")
    search_fields = ("slug", "name")

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def get_readonly_fields(self, request, obj=None):
        # The slug is the tenant_id inside every memory and every key's DLS query. An existing
        # tenant changes isolation only by moving its documents (`manage.py tenant_isolation`).
        readonly = ("slug", "isolation", "isolation_moving_to", "created_at")
        return readonly if obj else ("isolation_moving_to", "created_at")

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change:
            tenant_indices_ensure(tenant=obj)  # a new dedicated tenant gets its own indices now


@admin.register(Subject)
class SubjectAdmin(TenantScopedAdmin):
    act_roles = ADMIN
    editable = True
    list_display = ("external_id", "tenant", "display_name", "user_id", "created_at")
    list_filter = (TENANT_FILTER,)
    search_fields = ("external_id", "display_name", "=user_id")
    actions = ("rotate_key", "revoke_key")

    def get_readonly_fields(self, request, obj=None):
        # Tenant and ids are baked into the end-user's memories and key: fixed after creation.
        return ("tenant", "external_id", "user_id", "created_at") if obj else ("user_id", "created_at")

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if change:
            audit_record(actor=request.user, action="subject.changed", subject=obj, target_id=str(obj.user_id),
                         details={"fields": form.changed_data})
        else:
            audit_record(actor=request.user, action="subject.created", subject=obj, target_id=str(obj.user_id))
            subject_key_ensure(subject=obj, actor=request.user, lifetimes=KeyLifetimes.from_settings())

    @admin.action(description="Rotate the selected end-users' keys", permissions=["act"])
    def rotate_key(self, request, queryset):
        lifetimes = KeyLifetimes.from_settings()
        self._run(request, queryset, "rotated keys of",
                  lambda s: subject_key_rotate(subject=s, actor=request.user, lifetimes=lifetimes))

    @admin.action(description="Revoke the selected end-users' keys now", permissions=["act"])
    def revoke_key(self, request, queryset):
        self._run(request, queryset, "revoked keys of", lambda s: subject_key_revoke(subject=s, actor=request.user))


@admin.register(SubjectKey)
class SubjectKeyAdmin(TenantScopedAdmin):
    tenant_path = "subject__tenant"
    view_roles = OVERSIGHT
    act_roles = ADMIN
    exclude = ("secret_encrypted",)
    list_display = ("es_key_id", "subject", "state", "created_at", "expires_at", "rotated_at", "grace_until",
                    "revoked_at")
    list_filter = (("subject__tenant", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("es_key_id", "subject__external_id")
    list_select_related = ("subject__tenant",)
    actions = ("rotate_key", "revoke_key")

    @admin.action(description="Rotate (the selected keys' end-users get a new key)", permissions=["act"])
    def rotate_key(self, request, queryset):
        subjects = Subject.objects.filter(keys__in=self.actionable(request, queryset)).distinct()
        lifetimes = KeyLifetimes.from_settings()
        self._run(request, subjects, "rotated keys of",
                  lambda s: subject_key_rotate(subject=s, actor=request.user, lifetimes=lifetimes))

    @admin.action(description="Revoke the selected keys now", permissions=["act"])
    def revoke_key(self, request, queryset):
        self._run(request, queryset.select_related("subject__tenant"), "revoked",
                  lambda k: subject_key_revoke(subject=k.subject, key=k, actor=request.user))


class AgentTokenForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(choices=AgentToken.Scope.choices, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = AgentToken
        fields = ("tenant", "name", "scopes")


@admin.register(AgentToken)
class AgentTokenAdmin(TenantScopedAdmin):
    view_roles = OVERSIGHT
    act_roles = ADMIN
    list_display = ("name", "tenant", "prefix", "scopes", "created_at", "last_used_at", "revoked_at")
    list_filter = (TENANT_FILTER,)
    search_fields = ("name", "prefix")
    exclude = ("secret_hash",)
    actions = ("revoke_token",)

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = AgentTokenForm
        return super().get_form(request, obj, change=change, **kwargs)

    def has_add_permission(self, request):
        return self._allowed(request, self.act_roles)

    def save_model(self, request, obj, form, change):
        token, raw = agent_token_create(tenant=form.cleaned_data["tenant"], name=form.cleaned_data["name"],
                                        scopes=form.cleaned_data["scopes"], actor=request.user)
        # The admin carries on with `obj` (log entry, redirect): make it the saved token.
        obj.__dict__.update(token.__dict__)
        obj._raw_token = raw

    def response_add(self, request, obj, post_url_continue=None):
        # The raw token goes in this response and nowhere else: a message would be kept in the
        # session (or a cookie) until the next page.
        response = TemplateResponse(request, "admin/tenants/agenttoken/created.html",
                                    {**self.admin_site.each_context(request), "token": obj, "raw": obj._raw_token})
        add_never_cache_headers(response)
        return response

    @admin.action(description="Revoke the selected tokens", permissions=["act"])
    def revoke_token(self, request, queryset):
        self._run(request, queryset, "revoked", lambda t: agent_token_revoke(token=t, actor=request.user))


@admin.register(Membership)
class MembershipAdmin(TenantScopedAdmin):
    view_roles = OVERSIGHT
    list_display = ("user", "tenant", "role", "created_at")
    list_filter = ("role", TENANT_FILTER)
    search_fields = ("user__username", "tenant__slug")

    # Granting roles is a superuser matter: a tenant admin could otherwise promote anyone.
    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        audit_record(actor=request.user, action="membership.changed" if change else "membership.created",
                     tenant=obj.tenant, target_id=str(obj.pk),
                     details={"user": obj.user.get_username(), "role": obj.role})

    def delete_model(self, request, obj):
        audit_record(actor=request.user, action="membership.deleted", tenant=obj.tenant, target_id=str(obj.pk),
                     details={"user": obj.user.get_username(), "role": obj.role})
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for membership in queryset.select_related("user", "tenant"):
            self.delete_model(request, membership)


@admin.register(AuditEvent)
class AuditEventAdmin(TenantScopedAdmin):
    view_roles = COMPLIANCE  # the inspector's "audit.view"
    list_display = ("created_at", "actor_type", "actor", "action", "tenant_slug", "subject_ref", "target_id")
    list_filter = ("action", "actor_type", TENANT_FILTER)
    search_fields = ("actor", "action", "target_id", "=subject_ref")
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False  # append-only, and written by the services only
