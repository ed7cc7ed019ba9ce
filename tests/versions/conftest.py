"""The local Hub-like server, as the publishing tests have it."""

from tests.publish.conftest import TOKEN
from tests.publish.fake_hub import hub_fixture

hub = hub_fixture(TOKEN)
