from __future__ import annotations

import json
from pathlib import Path

import pytest

import vramscope
from vramscope.protocol import (
    PROTOCOL_VERSION,
    ProtocolError,
    check_protocol_version,
    validate_request,
)
from vramscope.settings import apply_settings, default_settings

ROOT = Path(__file__).resolve().parents[2]


def test_version_matches_package_json() -> None:
    package = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))
    assert vramscope.__version__ == package["version"]


def test_protocol_version_matches_docs() -> None:
    assert PROTOCOL_VERSION == "1.1.0"
    assert f"version {PROTOCOL_VERSION}" in (ROOT / "docs" / "protocol.md").read_text()


def _req(**over: object) -> dict[str, object]:
    base: dict[str, object] = {"type": "request", "id": "r1", "method": "get_devices", "params": {}}
    base.update(over)
    return base


def test_valid_request_passes_and_extra_fields_are_ignored() -> None:
    req = validate_request(_req(extra=1))
    assert req == {"type": "request", "id": "r1", "method": "get_devices", "params": {}}


@pytest.mark.parametrize(
    ("payload", "code", "reply_to"),
    [
        ([1, 2], "invalid_message", None),
        ("hello", "invalid_message", None),
        ({"id": "r1"}, "invalid_message", "r1"),
        (_req(type="hello"), "unknown_type", "r1"),
        (_req(id=""), "invalid_message", None),
        (_req(id=5), "invalid_message", "5"),  # echoed as sent (issue 21)
        (_req(method=3), "invalid_message", "r1"),
        (_req(params=None), "invalid_message", "r1"),
        (_req(method="explode"), "unknown_method", "r1"),
        (_req(method="get_insight", params={"model": 3}), "invalid_params", "r1"),
        (_req(method="get_insight", params={"model": ""}), "invalid_params", "r1"),
        (_req(method="get_insight", params={"model": "m" * 257}), "invalid_params", "r1"),
    ],
)
def test_invalid_requests(payload: object, code: str, reply_to: str | None) -> None:
    with pytest.raises(ProtocolError) as info:
        validate_request(payload)
    assert info.value.code == code
    assert info.value.in_reply_to == reply_to


@pytest.mark.parametrize("version", ["1.0.0", "1.4.2", "1.0.0-beta"])
def test_same_major_accepted(version: str) -> None:
    check_protocol_version({"protocol_version": version})


@pytest.mark.parametrize(
    "metadata", [{"protocol_version": "2.0.0"}, {}, None, {"protocol_version": 1}]
)
def test_major_mismatch_rejected(metadata: object) -> None:
    with pytest.raises(ProtocolError) as info:
        check_protocol_version(metadata)
    assert info.value.code == "protocol_mismatch"
    assert PROTOCOL_VERSION in info.value.message


def test_settings_defaults_and_patch() -> None:
    base = default_settings()
    assert base == {
        "sample_hz": 10.0,
        "cuda_peak_policy": "reset",
        "insight": True,
        "insight_budget_ms": 20.0,
        "history_limit": 36000,
        "cpu_peak": "sampled",
    }
    new = apply_settings(base, {"sample_hz": 0, "cuda_peak_policy": "preserve", "whatever": 1})
    assert new["sample_hz"] == 0 and new["cuda_peak_policy"] == "preserve"
    assert base["sample_hz"] == 10.0


@pytest.mark.parametrize(
    "patch",
    [
        {"sample_hz": 0.1},
        {"sample_hz": 51},
        {"sample_hz": float("nan")},
        {"sample_hz": True},
        {"cuda_peak_policy": "sometimes"},
        {"insight": 1},
        {"insight_budget_ms": -1},
        {"history_limit": 0},
        {"history_limit": 2.5},
    ],
)
def test_bad_settings_rejected(patch: dict[str, object]) -> None:
    with pytest.raises(ProtocolError) as info:
        apply_settings(default_settings(), patch)
    assert info.value.code == "invalid_params"


def test_report_keys_documented() -> None:
    from vramscope.report import REPORT_KEYS

    doc = (ROOT / "docs" / "report-schema.md").read_text(encoding="utf-8")
    table = doc.split("## Top level", 1)[1].split("##", 1)[0]
    documented = tuple(line.split("`")[1] for line in table.splitlines() if line.startswith("| `"))
    assert documented == REPORT_KEYS


def test_empty_insight_and_model_info() -> None:
    from vramscope.messages.insight import INSIGHT_KEYS, empty_insight, is_model_info, model_info

    empty = empty_insight("why")
    assert tuple(empty) == INSIGHT_KEYS
    assert empty["models"] == [] and empty["model"] is None and empty["skipped"] == "why"
    info = model_info("model", "Linear", 4096)
    assert info == {"name": "model", "type": "Linear", "param_bytes": 4096}
    assert is_model_info(info)
    for bad in ({**info, "param_bytes": -1}, {**info, "param_bytes": True}, {"name": "m"}, 3):
        assert not is_model_info(bad)


def test_insight_and_model_info_documented() -> None:
    from vramscope.messages.insight import INSIGHT_KEYS, MODEL_INFO_KEYS

    doc = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    insight = doc.split("interface Insight {", 1)[1].split("\n}", 1)[0]
    fields = tuple(line.split(":")[0].strip() for line in insight.splitlines() if ":" in line)
    assert fields == INSIGHT_KEYS
    model = doc.split("interface ModelInfo {", 1)[1].split("}", 1)[0]
    assert tuple(f.split(":")[0].strip() for f in model.split(";") if ":" in f) == MODEL_INFO_KEYS


def test_error_messages_do_not_echo_huge_input() -> None:
    huge = "x" * 1_000_000
    for payload in (_req(type=huge), _req(method=huge)):
        with pytest.raises(ProtocolError) as info:
            validate_request(payload)
        assert len(info.value.message) < 400
    with pytest.raises(ProtocolError) as info:
        apply_settings(default_settings(), {"cuda_peak_policy": huge})
    assert len(info.value.message) < 400 and "1000002 chars" in info.value.message
