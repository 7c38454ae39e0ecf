"""The pipe messages (vecenv._protocol): one frozen dataclass per kind of
vecenv._protocol.Msg, but the step's round message (a tuple)."""

import dataclasses
import pickle
import re

import pytest

from vecenv import _protocol as msgs
from vecenv._protocol import Msg

CLASSES = [
    obj
    for obj in vars(msgs).values()
    if isinstance(obj, type) and dataclasses.is_dataclass(obj) and hasattr(obj, "kind")
]


def _snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def test_one_class_per_kind_but_the_round():
    kinds = sorted(cls.kind for cls in CLASSES)
    assert kinds == sorted(m for m in Msg if m is not Msg.ROUND)
    for cls in CLASSES:
        assert Msg[_snake(cls.__name__)] is cls.kind  # Attach <-> ATTACH, ResetKwargs <-> ...


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_messages_are_frozen_and_pickle(cls):
    values = {f.name: f"{f.name}-value" for f in dataclasses.fields(cls)}
    msg = cls(**values)
    assert pickle.loads(pickle.dumps(msg)) == msg
    assert "kind" not in values  # a class constant, not sent as a field
    if values:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(msg, next(iter(values)), None)
