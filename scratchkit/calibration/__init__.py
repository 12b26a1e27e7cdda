"""Calibrating this machine: its hardware's speeds, measured with the kit's own calls."""
