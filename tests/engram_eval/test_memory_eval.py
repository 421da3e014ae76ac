"""memory_eval's ablation switch: --ranking NAME=VALUE changes the deployment's RankingConfig for the
eval alone; a change it cannot take stops the command before anything is written."""

import pytest
from django.core.management import CommandError, call_command

from engram_eval.management.commands.memory_eval import _ranking, _with
from memory_app.recall.ranking import RankingConfig


def test_the_ablation_changes_the_deployments_ranking(settings):
    settings.ENGRAM_RANKING = {"entity_legs": 1}
    assert _ranking([]) == RankingConfig(entity_legs=1)
    assert _ranking(["fusion=rrf", "fact_credit = 0"]) == RankingConfig(entity_legs=1, fusion="rrf", fact_credit=0.0)
    assert _with(["fusion=rrf"]) == " with fusion=rrf" and _with([]) == ""


@pytest.mark.parametrize(("change", "says"), [("fusion", "NAME=VALUE"), ("fusion=convex", "fusion must be"),
                                              ("ENGRAM_FUSION=rrf", "not a ranking setting")])
def test_a_change_it_cannot_take_stops_the_command(change, says):
    with pytest.raises(CommandError, match=says):
        call_command("memory_eval", "--ranking", change)
