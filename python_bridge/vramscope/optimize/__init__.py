"""Optimize: advice from what model insight measured (issue 10).

``schema`` holds the protocol shapes (no torch); the advisor and its helpers import torch
lazily, only when advice is asked for.
"""
