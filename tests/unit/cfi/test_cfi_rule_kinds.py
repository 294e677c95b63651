"""RuleKind is cfi.h's fu_rule_kind: every code _core names, by the same name, and nothing else."""

from fastunwind import _core
from fastunwind.cfi import RuleKind


def test_rule_kind_members_are_the_cores_rule_kinds():
    assert [(kind.name, kind.value) for kind in RuleKind] == list(zip(_core.RULE_KINDS, range(len(_core.RULE_KINDS))))
