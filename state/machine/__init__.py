"""The per-group state machine (core.py) and its parts, one concern per module."""
from state.machine.core import GroupStateMachine, run_turn

__all__ = ["GroupStateMachine", "run_turn"]
