from django.apps import AppConfig


class InspectorConfig(AppConfig):
    name = "inspector"
