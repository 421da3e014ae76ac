from django.contrib.auth import views as auth_views
from django.urls import path, re_path

from . import views

app_name = "inspector"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(template_name="registration/login.html",
                                                redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("u/<uuid:user_id>/", views.subject_page, name="subject"),
    path("u/<uuid:user_id>/episodes/live/", views.episodes_live, name="episodes_live"),
    path("u/<uuid:user_id>/episodes/more/", views.episodes_more, name="episodes_more"),
    path("u/<uuid:user_id>/chain/<str:memory_id>/", views.chain_page, name="chain"),
    path("u/<uuid:user_id>/recall/", views.recall_sandbox, name="recall"),
    path("u/<uuid:user_id>/consolidation/", views.consolidation_panel, name="consolidation"),
    path("u/<uuid:user_id>/consolidation/dry-run/", views.consolidation_dry_run, name="consolidation_dry_run"),
    path("u/<uuid:user_id>/consolidation/run/", views.consolidation_now, name="consolidation_run"),
    path("u/<uuid:user_id>/forget/<str:memory_id>/", views.forget, name="forget"),
    path("u/<uuid:user_id>/export/", views.export, name="export"),
    path("u/<uuid:user_id>/erase/", views.erase, name="erase"),
    path("t/<slug:slug>/keys/", views.keys_page, name="keys"),
    path("t/<slug:slug>/keys/<uuid:user_id>/rotate/", views.key_rotate, name="key_rotate"),
    path("t/<slug:slug>/keys/<uuid:user_id>/revoke/", views.key_revoke, name="key_revoke"),
    path("t/<slug:slug>/tokens/", views.token_create, name="token_create"),
    path("t/<slug:slug>/tokens/<int:token_id>/revoke/", views.token_revoke, name="token_revoke"),
    path("t/<slug:slug>/usage/", views.usage_page, name="usage"),
    path("t/<slug:slug>/audit/", views.audit_page, name="audit"),
    re_path(r"^t/(?P<slug>[-\w]+)/audit/export\.(?P<fmt>csv|jsonl)$", views.audit_export, name="audit_export"),
    path("t/<slug:slug>/audit/tokens/", views.token_access, name="token_access"),
    path("t/<slug:slug>/audit/public-keys.json", views.audit_public_keys, name="audit_public_keys"),
    path("t/<slug:slug>/audit/verify/", views.audit_verify, name="audit_verify"),
    path("t/<slug:slug>/audit/checkpoint/", views.audit_checkpoint, name="audit_checkpoint"),
]
