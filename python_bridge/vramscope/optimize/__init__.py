"""Optimize: advice from what model insight measured (issue 10).

Its message shapes live beside the protocol, in ``vramscope.messages.optimize`` (no torch); the
advisor and its helpers import torch lazily, only when advice is asked for.
"""
