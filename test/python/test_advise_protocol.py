"""get_advice request validation (protocol 1.1, docs/protocol.md "Optimize")."""

from __future__ import annotations

import pytest

from vramscope.protocol import ProtocolError, validate_request


def _request(params: dict[str, object]) -> dict[str, object]:
    return {"type": "request", "id": "r1", "method": "get_advice", "params": params}


@pytest.mark.parametrize("params", [{}, {"model": None}, {"model": "net"}, {"model": "m" * 256}])
def test_get_advice_accepts(params: dict[str, object]) -> None:
    assert validate_request(_request(params))["method"] == "get_advice"


@pytest.mark.parametrize("model", ["", "m" * 257, 3, ["model"], True])
def test_get_advice_rejects_bad_model(model: object) -> None:
    with pytest.raises(ProtocolError) as err:
        validate_request(_request({"model": model}))
    assert err.value.code == "invalid_params"
    assert err.value.in_reply_to == "r1"
