import pytest


@pytest.fixture(autouse=True)
def _invalidate_minted_keys(invalidate_minted_keys):
    yield
