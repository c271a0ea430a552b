"""``vramscope.widget()``: the ipywidgets model the front end's view is registered for."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest

import vramscope
from vramscope.runtime import get_runtime

widget_module = importlib.import_module("vramscope.widget")


def test_the_widget_names_the_registered_view_and_carries_only_ids() -> None:
    pytest.importorskip("ipywidgets")
    w = vramscope.widget(device="cuda:0", window=30, height=90)
    try:
        state = w.get_state()
        assert state["_model_module"] == state["_view_module"] == "jupyterlab-vramscope"
        # the front end registers 1.0.0 (src/widget/widget.ts WIDGET_MODULE_VERSION)
        assert state["_model_module_version"] == "^1.0.0"
        assert (state["_model_name"], state["_view_name"]) == (
            "MemoryWidgetModel",
            "MemoryWidgetView",
        )
        assert state["session_id"] == get_runtime().session_id
        assert (state["device"], state["window"], state["height"]) == ("cuda:0", 30.0, 90)
        # no data stream goes through the widget: only these traits are synced
        own = {"session_id", "device", "window", "height"}
        assert own <= set(state)
        assert not {"samples", "cells", "data"} & set(state)
        assert vramscope.widget().device == ""
    finally:
        w.close()


def test_without_ipywidgets_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    widget_module._widget_class.cache_clear()
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import fails
    try:
        with pytest.raises(ImportError) as info:
            vramscope.widget()
        assert "%pip install ipywidgets" in str(info.value)
        assert "vramscope.widget() needs ipywidgets" in str(info.value)
    finally:
        widget_module._widget_class.cache_clear()


@pytest.mark.kernel
def test_widget_opens_its_comm_in_a_real_kernel(kernel: Any) -> None:
    pytest.importorskip("ipywidgets")
    start = len(kernel.iopub)
    kernel.run_ok("import vramscope\n_w = vramscope.widget(window=20)\n_w", cell_id="widget")
    shown = kernel.wait_iopub(
        lambda m: (
            m["msg_type"] == "execute_result"
            and "application/vnd.jupyter.widget-view+json" in m["content"]["data"]
        )
    )
    opens = [
        m
        for m in kernel.iopub[start:]
        if m["msg_type"] == "comm_open" and m["content"]["target_name"] == "jupyter.widget"
    ]
    ours = [
        m for m in opens if m["content"]["data"]["state"].get("_view_name") == "MemoryWidgetView"
    ]
    assert len(ours) == 1
    state = ours[0]["content"]["data"]["state"]
    assert state["window"] == 20.0
    assert state["session_id"] == kernel.eval(
        "__import__('vramscope.runtime').runtime.get_runtime().session_id"
    )
    view = shown["content"]["data"]["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == ours[0]["content"]["comm_id"]
